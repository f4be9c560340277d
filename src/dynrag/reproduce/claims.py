"""A paper's claim about two rows of a table, decided by a paired test on our questions.

Each claim says one row beats another on one metric. Both rows scored the same questions, so the
test is paired. Right/wrong scores (EM, accuracy) get the exact McNemar test on the questions one
row gets right and the other wrong; graded ones (F1, retrievals) a two-sided permutation test
that flips the sign of each question's difference (scipy's ``permutation_test``, 9,999 resamples,
fixed seed). The verdict: *holds* when the
claimed row is ahead and p < 0.05, *does not hold* when it is behind and p < 0.05, and
*undetermined* otherwise (no difference shown on these questions; more questions may show one).

Each printed claim line is a ``ClaimLine``: the text, carrying its ``Decided`` figures, so the
result record of a run (reproduce/record_build.py) reads the verdicts the table printed instead of
testing again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dynrag.eval.significance import mcnemar_p, verdict
from dynrag.reproduce.tables import RunSpec, records_of

RESAMPLES = 9_999


@dataclass(frozen=True)
class Claim:
    text: str  # the paper's claim, in our words
    better: str  # row key said to be ahead
    worse: str  # row key said to be behind
    metric: str  # our metric key it is judged on
    ledger: str | None = None  # the claim's id in data/claims.json, where the ledger has it


@dataclass(frozen=True)
class Decided:
    """A claim decided on one dataset, as a result record keeps it."""

    text: str
    dataset: str
    test: str
    n: int
    p: float
    difference: float | None
    verdict: str  # holds | does not hold | undetermined
    ledger: str | None = None


class ClaimLine(str):
    """A printed claim line that carries what it decided (list concatenation and joining keep it)."""

    decided: Decided

    def __new__(cls, text: str, decided: Decided) -> "ClaimLine":
        line = super().__new__(cls, text)
        line.decided = decided
        return line


def decided_in(lines: Sequence[str]) -> list[Decided]:
    """The decisions of the claim lines among ``lines``, in order."""
    return [line.decided for line in lines if isinstance(line, ClaimLine)]


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    n: int
    difference: float  # mean of better − worse
    p: float
    verdict: str  # holds | does not hold | undetermined
    test: str = "paired permutation"  # or "McNemar (exact)" for right/wrong scores


def paired_permutation_p(a: Sequence[float], b: Sequence[float], seed: int = 0) -> float:
    """Two-sided p of the mean paired difference ``a − b`` under random sign flips (1.0 when
    every difference is zero, or there is one pair: nothing to tell apart)."""
    import numpy as np
    from scipy.stats import permutation_test

    if len(a) != len(b) or not a:
        raise ValueError("a paired test needs two equally long, non-empty score lists")
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if not diff.any() or len(diff) < 2:
        return 1.0
    result = permutation_test((diff,), np.mean, permutation_type="samples", n_resamples=RESAMPLES,
                              alternative="two-sided", random_state=seed)
    return float(result.pvalue)


def decide(claim: Claim, better: dict[str, float], worse: dict[str, float]) -> Verdict:
    """The verdict from each question's score (question id -> score) in the two rows; only the
    questions both rows scored are paired. Scores that are all 0 or 1 (EM, accuracy; any metric
    that takes only those values on these questions) get the exact McNemar test, the exact test
    for paired right/wrong outcomes; graded ones (F1, retrievals) the paired permutation test."""
    shared = sorted(set(better) & set(worse))
    a, b = [better[q] for q in shared], [worse[q] for q in shared]
    binary = bool(shared) and all(x in (0.0, 1.0) for x in a + b)
    if binary:
        p, test = mcnemar_p([x == 1.0 for x in a], [x == 1.0 for x in b]), "McNemar (exact)"
    else:
        p, test = (paired_permutation_p(a, b) if shared else 1.0), "paired permutation"
    difference = (sum(a) - sum(b)) / len(shared) if shared else 0.0
    return Verdict(claim, len(shared), difference, p, verdict(difference, p), test)


def question_scores(summary: dict[str, Any] | None, key: str) -> dict[str, float]:
    """Question id -> figure ``key`` of a row's records ({} when the row was not run)."""
    return {str(r["id"]): float(r.get(key) or 0.0) for r in records_of(summary) or []}


def claim_line(claim: Claim, labels: dict[str, str], results: dict, dataset: str) -> str | None:
    """The claim decided on the two rows' records on ``dataset`` (None when either was not run)."""
    better, worse = (question_scores(results.get((dataset, k)), claim.metric) for k in (claim.better, claim.worse))
    if not better or not worse:
        return None
    v = decide(claim, better, worse)
    what = f"{labels[claim.better]} − {labels[claim.worse]} on {claim.metric}"
    return ClaimLine(f"- {dataset}: {claim.text}: {what} = "
                     f"{v.difference:+.3f}; {v.test}, n = {v.n}, p = {v.p:.3g}: **{v.verdict}**.",
                     Decided(f"{claim.text}: {what}", dataset, v.test, v.n, v.p, v.difference,
                             v.verdict, claim.ledger))


def tested_claims(heading: str, claims: Sequence[Claim], runs: Sequence[RunSpec], datasets: Sequence[str] | None,
                  results: dict) -> list[str]:
    """Under ``heading``, each claim decided on each dataset where both its rows ran; [] when none did.
    ``datasets`` None: those of ``runs``, in their order."""
    labels = {s.key: s.label for s in runs}
    if datasets is None:
        datasets = list(dict.fromkeys(s.dataset for s in runs))
    lines = [line for ds in datasets for claim in claims if (line := claim_line(claim, labels, results, ds))]
    return ["", heading, "", *lines] if lines else []
