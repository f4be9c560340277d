"""`dynrag reproduce deeprag-figure3`: GRPO on a tiny world's train split from a tiny model, its
dev checks as the figure's rows, and the two readings decided by paired tests."""

from __future__ import annotations

import pytest

from dynrag.errors import ConfigError
from dynrag.reproduce.deeprag_figure3 import claims, split_options
from tests.cli_inprocess import run_in_process
from tests.deeprag.conftest import tiny_model_dir  # noqa: F401  (the fixture)
from tests.reproduce.test_world import world  # noqa: F401  (the fixture)


def check(step: int, rows: list[tuple[float, int]]) -> dict:
    return {"step": step, "questions": [{"id": f"q{i}", "em": f1, "f1": f1, "retrievals": r, "subquestions": r + 1}
                                        for i, (f1, r) in enumerate(rows)]}


def test_rising_f1_and_falling_retrievals_hold_when_paired_and_clear():
    first = check(0, [(0.0, 3)] * 12)
    last = check(20, [(1.0, 1)] * 10 + [(0.0, 3)] * 2)
    tested = claims(first, last)
    rise, fall = tested["F1 rises"], tested["retrievals per question fall"]
    assert (rise.n, rise.test) == (12, "paired permutation") and rise.effect == pytest.approx(10 / 12)
    assert rise.verdict == "holds" and fall.verdict == "holds" and fall.effect == pytest.approx(20 / 12)
    flat = claims(first, check(20, [(0.0, 3)] * 11 + [(1.0, 3)]))
    assert flat["F1 rises"].verdict == "undetermined" and flat["retrievals per question fall"].p == 1.0
    worse = claims(last, first)
    assert worse["F1 rises"].verdict == "does not hold" and worse["retrievals per question fall"].verdict == "does not hold"


def test_figure_options_and_grpo_options_are_told_apart():
    own, rest = split_options({"recipe": "cpu-small", "steps": "4", "group": "2", "beta": "0"})
    assert (own.recipe, own.steps, own.dev_every) == ("cpu-small", 4, 5) and rest == {"group": "2", "beta": "0"}
    with pytest.raises(ConfigError, match="steps"):
        split_options({"steps": "0"})


@pytest.mark.slow
def test_the_figure_trains_on_the_world_and_checks_its_dev_split(tmp_path, world, tiny_model_dir):  # noqa: F811
    out = tmp_path / "runs"
    args = ["reproduce", "deeprag-figure3", "--world", world, "--model", f"hf:{tiny_model_dir}", "--out", out,
            "--limit", "2", "--no-progress"]
    small = ["--option", "recipe=cpu-small", "--option", "steps=2", "--option", "dev_every=1", "--option", "group=2",
             "--option", "batch_size=1", "--option", "max_new_tokens=12", "--option", "shots=0", "--option", "threads=1",
             "--option", "method=full"]
    result = run_in_process(*args, *small)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [row.split("|")[1].strip() for row in rows] == ["0", "1", "2"]
    assert "n = 2 dev questions per check" in result.stdout and "cpu-small" in result.stdout
    assert result.stdout.count("paired permutation, n 2") == 2
    assert (out / "deeprag-figure3").rglob("grpo_dev.png")
    again = run_in_process(*args, *small, "--no-run")
    assert again.returncode == 0 and rows == [l for l in again.stdout.splitlines() if l in rows]

    for extra, needle in ((["--option", "steps=2", "--option", "dev_every=3"], "dev_every"),
                          (["--option", "bogus=1"], "bogus"), (["--row", "x"], "only --world")):
        bad = run_in_process(*args, *extra)
        assert bad.returncode != 0 and needle in bad.stderr and "Traceback" not in bad.stderr
    missing = run_in_process("reproduce", "deeprag-figure3", "--model", f"hf:{tiny_model_dir}", "--out", out)
    assert missing.returncode != 0 and "--world" in missing.stderr
