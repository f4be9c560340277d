"""McNemar and the verdict rule against hand-worked values."""

import pytest

from dynrag.eval.significance import mcnemar, mcnemar_p, verdict


def test_mcnemar_p_is_the_two_sided_binomial_on_the_discordant_pairs():
    # 3 questions right only in a, none only in b: P(3 of 3 | 0.5) = 1/8, two-sided 2/8
    assert mcnemar_p([True, True, True, False], [False, False, False, False]) == pytest.approx(0.25)
    # 6 against 4 discordant: two-sided binomial of 6 in 10 = 1 - P(X=5) = 1 - 252/1024 = 0.75390625
    a = [True] * 6 + [False] * 4 + [True, False]
    b = [False] * 6 + [True] * 4 + [True, False]
    assert mcnemar_p(a, b) == pytest.approx(0.75390625)
    assert mcnemar_p([True, False], [True, False]) == 1.0  # no discordant pair


def test_mcnemar_effect_n_and_verdict():
    a = [True] * 9 + [False]
    b = [False] * 9 + [False]
    t = mcnemar(a, b)
    # 9 discordant, all for a: two-sided p = 2 / 2**9 = 0.00390625
    assert (t.n, t.effect, t.p) == (10, pytest.approx(0.9), pytest.approx(0.00390625))
    assert t.verdict == "holds" and mcnemar(b, a).verdict == "does not hold"
    assert verdict(0.5, 0.05) == "undetermined"  # p must be below 0.05
    with pytest.raises(ValueError):
        mcnemar_p([True], [True, False])
