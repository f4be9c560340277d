"""Paired significance tests and the verdict rule every claim in dynrag is decided by (pure
functions; scipy does the statistics).

Every test is two-sided; a claim's direction is read from its effect. *holds* when the effect goes
the claimed way and p < 0.05, *does not hold* when it goes the other way and p < 0.05,
*undetermined* otherwise (no difference shown on these questions; more questions may show one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ALPHA = 0.05


@dataclass(frozen=True)
class Tested:
    """One test's outcome: what it compared, on how many, and its p."""

    test: str  # e.g. "McNemar (exact)"
    n: int
    effect: float  # signed: > 0 means the claimed direction
    p: float

    @property
    def verdict(self) -> str:
        return verdict(self.effect, self.p)


def verdict(effect: float, p: float) -> str:
    if p < ALPHA and effect > 0:
        return "holds"
    if p < ALPHA and effect < 0:
        return "does not hold"
    return "undetermined"


def mcnemar_p(a: Sequence[bool], b: Sequence[bool]) -> float:
    """Exact two-sided McNemar p for paired right/wrong outcomes: a binomial test on the pairs
    where exactly one is right (1.0 when there is none)."""
    from scipy.stats import binomtest

    if len(a) != len(b):
        raise ValueError("McNemar needs two outcomes per question")
    only_a = sum(1 for x, y in zip(a, b) if x and not y)
    only_b = sum(1 for x, y in zip(a, b) if y and not x)
    if only_a + only_b == 0:
        return 1.0
    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


def mcnemar(a: Sequence[bool], b: Sequence[bool]) -> Tested:
    """``a`` right more often than ``b`` on the same questions? (effect: a's share minus b's)"""
    n = len(a)
    effect = (sum(a) - sum(b)) / n if n else 0.0
    return Tested("McNemar (exact)", n, effect, mcnemar_p(a, b) if n else 1.0)
