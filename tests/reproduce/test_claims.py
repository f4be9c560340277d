"""The verdict rule of `reproduce` claims: which paired test decides a claim, and its p."""

import pytest


def test_right_or_wrong_scores_get_mcnemar_and_graded_ones_the_permutation_test():
    from dynrag.reproduce.claims import Claim, decide

    claim = Claim("a beats b", "a", "b", "em")
    # 9 questions only a gets right, 1 only b: exact McNemar p = 2 * P(X <= 1 | n 10, 1/2) = 22/1024
    a = {f"q{i}": 1.0 for i in range(10)} | {"q10": 0.0, "q11": 1.0}
    b = {f"q{i}": 0.0 for i in range(9)} | {"q9": 1.0, "q10": 1.0, "q11": 1.0}
    v = decide(claim, a, b)
    assert v.test == "McNemar (exact)" and v.n == 12 and v.p == pytest.approx(22 / 1024)
    assert v.verdict == "holds" and v.difference == pytest.approx(8 / 12)
    graded = decide(Claim("a beats b on F1", "a", "b", "f1"), {"q0": 0.5, "q1": 1.0}, {"q0": 0.0, "q1": 1.0})
    assert graded.test == "paired permutation" and graded.verdict == "undetermined"


def test_claims_are_decided_on_each_dataset_the_runs_cover_in_their_order(tmp_path):
    from dynrag.io.jsonl import json_line
    from dynrag.io.rundir import PREDICTIONS
    from dynrag.reproduce.claims import Claim, tested_claims
    from dynrag.reproduce.tables import RunSpec

    def run(name, ems):
        d = tmp_path / name
        d.mkdir()
        (d / PREDICTIONS).write_text("".join(json_line({"id": f"q{i}", "em": em}) for i, em in enumerate(ems)))
        return {"run_dir": str(d)}

    runs = [RunSpec(ds, key, key.upper(), "single", {}) for ds in ("two", "one") for key in ("a", "b")]
    results = {("two", "a"): run("2a", [1, 1, 0]), ("two", "b"): run("2b", [0, 1, 0]),
               ("one", "a"): run("1a", [1, 0]), ("one", "b"): run("1b", [1, 0])}
    lines = tested_claims("Claims:", [Claim("a beats b", "a", "b", "em")], runs, None, results)
    assert lines[:3] == ["", "Claims:", ""] and len(lines) == 5
    # one question apart on "two" (+1/3, exact McNemar p 1); none on "one"
    assert lines[3].startswith("- two: a beats b: A − B on em = +0.333;") and "p = 1:" in lines[3]
    assert lines[4].startswith("- one: a beats b: A − B on em = +0.000;")
    assert tested_claims("Claims:", [Claim("a beats b", "a", "b", "em")], runs, ["one"], results)[3:] == lines[4:]
