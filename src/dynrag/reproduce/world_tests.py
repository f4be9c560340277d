"""The significance tests the world's claims are decided by (pure functions over per-question
figures; scipy does the statistics).

Every test is two-sided; a claim's direction is read from its effect, and its verdict follows the
rule of ``eval/significance.py`` (where McNemar lives too, as ``dynrag compare --claims`` uses it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from dynrag.datasets.boundary import mcc
from dynrag.eval.significance import ALPHA, Tested, mcnemar, mcnemar_p, verdict  # noqa: F401  (re-exported)
from dynrag.reproduce.claims import RESAMPLES, paired_permutation_p

BOOTSTRAP_RESAMPLES = 2_000
SEED = 0


def independent_permutation_p(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p of mean(x) − mean(y) when the group labels are shuffled (scipy's
    ``permutation_test``, 9,999 resamples, fixed seed); 1.0 when a group has fewer than two
    values (scipy refuses it, and one value tells nothing) or all are equal."""
    from scipy.stats import permutation_test

    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(xs) < 2 or len(ys) < 2 or np.all(np.concatenate([xs, ys]) == xs[0]):
        return 1.0
    result = permutation_test((xs, ys), lambda a, b: np.mean(a) - np.mean(b), permutation_type="independent",
                              n_resamples=RESAMPLES, alternative="two-sided", random_state=SEED)
    return float(result.pvalue)


def lower_mean(x: Sequence[float], y: Sequence[float]) -> Tested:
    """Is mean(x) below mean(y), x and y from different questions? (effect: mean(y) − mean(x))"""
    effect = float(np.mean(y) - np.mean(x)) if len(x) and len(y) else 0.0
    return Tested("permutation (two groups)", len(x) + len(y), effect, independent_permutation_p(x, y))


def paired_lower(a: Sequence[float], b: Sequence[float]) -> Tested:
    """Is ``a`` below ``b`` on the same questions? (effect: mean of b − a; sign-flip permutation)"""
    n = len(a)
    effect = float(np.mean(np.asarray(b, float) - np.asarray(a, float))) if n else 0.0
    return Tested("paired permutation", n, effect, paired_permutation_p(list(b), list(a)) if n else 1.0)


def fisher_association(tp: int, fp: int, fn: int, tn: int) -> Tested:
    """Fisher's exact test on a 2x2 table (rows: predicted yes / no; columns: truth yes / no);
    the effect is the MCC, > 0 when the prediction goes with the truth."""
    from scipy.stats import fisher_exact

    n = tp + fp + fn + tn
    if n == 0:
        return Tested("Fisher exact", 0, 0.0, 1.0)
    p = float(fisher_exact([[tp, fp], [fn, tn]], alternative="two-sided").pvalue)
    return Tested("Fisher exact", n, mcc(tp, fp, fn, tn), p)


def mcc_of(predicted: np.ndarray, truth: np.ndarray) -> float:
    tp = int(np.sum(predicted & truth))
    fp = int(np.sum(predicted & ~truth))
    fn = int(np.sum(~predicted & truth))
    tn = int(np.sum(~predicted & ~truth))
    return mcc(tp, fp, fn, tn)


def mcc_interval(predicted: Sequence[bool], truth: Sequence[bool], level: float = 0.95) -> tuple[float, float] | None:
    """A percentile bootstrap interval of the MCC over (prediction, truth) pairs, resampled
    together (scipy's ``bootstrap``, 2,000 resamples, fixed seed); None with under two pairs or
    when every pair is the same (no spread to resample)."""
    from scipy.stats import bootstrap

    p, t = np.asarray(predicted, dtype=bool), np.asarray(truth, dtype=bool)
    if len(p) < 2 or (np.all(p == p[0]) and np.all(t == t[0])):
        return None
    statistic: Callable[[np.ndarray, np.ndarray], float] = lambda a, b: mcc_of(a.astype(bool), b.astype(bool))
    result = bootstrap((p, t), statistic, paired=True, vectorized=False, n_resamples=BOOTSTRAP_RESAMPLES,
                       confidence_level=level, method="percentile", random_state=SEED)
    low, high = result.confidence_interval
    return float(low), float(high)
