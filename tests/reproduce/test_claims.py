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
