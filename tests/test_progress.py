"""Progress lines: a rate and an ETA, per hour for slow work."""

from rich.console import Console

from dynrag.progress import format_eta, format_rate, progress_bar


def test_rates_and_etas_read_naturally():
    assert format_rate(0.01, "questions") == "36.0 questions/h"
    assert format_rate(2.5, "steps") == "2.50 steps/s"
    assert format_rate(None, "steps") == "– steps/s"
    assert format_eta(3725) == "1:02:05" and format_eta(None) == "–"


def test_without_a_terminal_progress_is_a_plain_line_with_rate_and_eta():
    console = Console(record=True, force_terminal=False, width=200)
    with progress_bar("synth", 2, 0, console, True, unit="questions") as bar:
        bar.advance("found 0/1")
        bar.advance("found 1/2")
    text = console.export_text()
    assert "synth 2/2 found 1/2" in text and "questions/" in text and "ETA 0:00:00" in text
    quiet = Console(record=True, force_terminal=False)
    with progress_bar("synth", 1, 0, quiet, False) as bar:
        bar.advance()
    assert quiet.export_text() == ""
