"""Figure 3's finding per metric, from hand-made per-question records."""

from dynrag.reproduce.bestpractice_figure3_claims import figure3_claims

ROWS = [("base", "M_b (base)", "b"), ("g", "M_g", "g"), ("gr", "M_gr", "gr")]


def cell(covered, covered_text=None):
    covered_text = covered if covered_text is None else covered_text
    return [{"id": f"q{i}", "coverage": c, "coverage_text": t} for i, (c, t) in enumerate(zip(covered, covered_text))]


def test_the_finding_holds_on_one_metric_and_fails_on_the_other():
    records = {
        # extracted answers: M_gr covers all 8, the base none, M_g one; whole text: the base's
        # longer replies cover all 8 as well, so there it ties with M_gr
        ("gr", "g"): cell([1] * 8, [1] * 8),
        ("base", "g"): cell([0] * 8, [1] * 8),
        ("g", "g"): cell([1] + [0] * 7, [1] + [0] * 7),
    }
    lines = figure3_claims(ROWS, records)
    assert lines == [
        # 8 discordant pairs against the base: 2 * 0.5^8 = 0.0078; 7 against M_g: 2 * 0.5^7 = 0.0156
        "- M_gr covers the answer best under D_g (extracted answer): vs M_b (base) +1.000, n 8, p 0.008; "
        "vs M_g +0.875, n 8, p 0.016 (McNemar, exact): **holds**.",
        # whole text: tied with the base (no discordant pair: p 1), above M_g: undetermined overall
        "- M_gr covers the answer best under D_g (whole text): vs M_b (base) +0.000, n 8, p 1.000; "
        "vs M_g +0.875, n 8, p 0.016 (McNemar, exact): **undetermined**.",
    ]


def test_a_row_above_m_gr_refutes_it_and_missing_readers_are_named():
    records = {("gr", "gr"): cell([0] * 8), ("base", "gr"): cell([1] * 8)}
    lines = figure3_claims(ROWS, records)
    assert lines[0].endswith("vs M_b (base) -1.000, n 8, p 0.008 (McNemar, exact): **does not hold**.")
    assert len(lines) == 2 and "(whole text)" in lines[1]
    assert "not run (give --reader gr=DIR" in figure3_claims(ROWS[:2], records)[0]
    assert "no cell of D_g or D_gr has answers yet" in figure3_claims(ROWS, {})[0]
