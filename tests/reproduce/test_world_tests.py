"""The world's significance tests against hand-computed values."""

import math

import pytest

from dynrag.reproduce.world_tests import (
    fisher_association,
    lower_mean,
    mcc_interval,
    mcnemar,
    mcnemar_p,
    paired_lower,
    verdict,
)


def test_mcnemar_is_a_binomial_test_on_the_discordant_pairs():
    # 6 questions only a gets right, 1 only b: two-sided exact p = 2 * P(X <= 1), X ~ Bin(7, 1/2) = 2 * 8/128
    a = [True] * 6 + [False] + [True] * 3 + [False] * 2
    b = [False] * 6 + [True] + [True] * 3 + [False] * 2
    assert mcnemar_p(a, b) == pytest.approx(16 / 128)
    tested = mcnemar(a, b)
    assert tested.n == 12 and tested.effect == pytest.approx((9 - 4) / 12) and tested.verdict == "undetermined"
    assert mcnemar_p([True, False], [True, False]) == 1.0  # no discordant pair: nothing to tell apart


def test_mcnemar_decides_both_ways():
    better, worse = [True] * 10, [False] * 10  # p = 2 * 0.5^10
    assert mcnemar(better, worse).p == pytest.approx(2 / 1024) and mcnemar(better, worse).verdict == "holds"
    assert mcnemar(worse, better).verdict == "does not hold"


def test_permutation_of_two_groups_is_exact_when_small():
    # 3 zeros against 3 ones: of the C(6, 3) = 20 splits one is as low, one as high: p = 2 / 20
    tested = lower_mean([0, 0, 0], [1, 1, 1])
    assert tested.p == pytest.approx(0.1) and tested.effect == 1.0 and tested.n == 6
    assert lower_mean([1, 1], [1, 1]).p == 1.0
    # one value in a group: nothing to test (scipy would refuse it), whatever the values
    assert lower_mean([0], [2, 3, 4]).p == 1.0 and lower_mean([0], [2, 3, 4]).effect == 3.0


def test_paired_permutation_flips_signs():
    # five questions, each 1 fewer in a: 2 of the 2^5 sign patterns are as extreme: p = 1/16
    tested = paired_lower([0] * 5, [1] * 5)
    assert tested.p == pytest.approx(1 / 16) and tested.effect == 1.0


def test_fisher_exact_on_a_perfect_table():
    # [[4, 0], [0, 4]]: one table of C(8, 4) = 70 at least as extreme each way: p = 2 / 70; MCC 1
    tested = fisher_association(4, 0, 0, 4)
    assert tested.p == pytest.approx(2 / 70) and tested.effect == 1.0 and tested.verdict == "holds"
    assert fisher_association(0, 0, 0, 0).p == 1.0


def test_mcc_interval_brackets_the_value_and_is_none_without_spread():
    predicted = [True] * 30 + [False] * 30
    truth = [True] * 25 + [False] * 5 + [False] * 25 + [True] * 5  # MCC = (25*25 - 5*5) / 30^2 = 2/3
    low, high = mcc_interval(predicted, truth)
    assert low < 2 / 3 < high and -1 <= low and high <= 1
    assert mcc_interval([True, True], [False, False]) is None


def test_verdict_rule():
    assert verdict(0.1, 0.01) == "holds" and verdict(-0.1, 0.01) == "does not hold"
    assert verdict(0.1, 0.2) == "undetermined" and verdict(0.0, math.nan) == "undetermined"
