"""DeepRAG's knowledge-boundary figures: does a method skip retrieval exactly when the model knows?

Per question, the *prediction* is "the method did not retrieve" (retrievals == 0) and the *truth*
is "the model alone got it right" (the no-retrieval run's EM is 1). That is the paper's positive
class (DeepRAG, Table 3): a method that always retrieves predicts no positive and scores F1 0
with accuracy = the share of questions the model alone gets wrong (.718 on its 2Wiki sample).
The figures are the positive class's F1, accuracy, balanced accuracy and Matthews correlation of
that 2x2 table; the last three do not depend on which class is called positive.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Confusion:
    tp: int  # did not retrieve, and the no-retrieval answer was right
    fp: int  # did not retrieve, though the no-retrieval answer was wrong
    fn: int  # retrieved, though the no-retrieval answer was right
    tn: int  # retrieved, and the no-retrieval answer was wrong

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn


def confusion(skipped_retrieval: Iterable[bool], known: Iterable[bool]) -> Confusion:
    """Counts of (did not retrieve) against (the model alone was right), question by question."""
    tp = fp = fn = tn = 0
    for skipped, right in zip(skipped_retrieval, known, strict=True):
        if skipped and right:
            tp += 1
        elif skipped:
            fp += 1
        elif right:
            fn += 1
        else:
            tn += 1
    return Confusion(tp, fp, fn, tn)


def mcc(tp: int, fp: int, fn: int, tn: int) -> float:
    """Matthews correlation of a 2x2 table, in [-1, 1]. When a row or column of the table is empty
    (nothing predicted on one side, or no truth on one side) the denominator is 0 and MCC is 0, as
    scikit-learn defines it: such a table says nothing about agreement."""
    den = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return (tp * tn - fp * fn) / den if den else 0.0


def boundary_scores(c: Confusion) -> dict[str, float]:
    """F1 (positive = did not retrieve / known), accuracy, balanced accuracy and MCC of a 2x2 table.

    Conventions for empty denominators follow scikit-learn: F1 and MCC are 0; balanced accuracy
    averages the recall of the classes that occur.
    """
    f1_den = 2 * c.tp + c.fp + c.fn
    f1 = 2 * c.tp / f1_den if f1_den else 0.0
    accuracy = (c.tp + c.tn) / c.n if c.n else 0.0
    recalls = []
    if c.tp + c.fn:
        recalls.append(c.tp / (c.tp + c.fn))
    if c.tn + c.fp:
        recalls.append(c.tn / (c.tn + c.fp))
    balanced = sum(recalls) / len(recalls) if recalls else 0.0
    return {"f1": f1, "accuracy": accuracy, "balanced_accuracy": balanced, "mcc": mcc(c.tp, c.fp, c.fn, c.tn)}


def knowledge_boundary(
    predictions: Iterable[Mapping[str, Any]], baseline: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """The figures over the questions both runs answered (joined on id), with the 2x2 counts."""
    base_em = {p["id"]: float(p["em"]) for p in baseline}
    skipped, known = [], []
    missing = 0
    for p in predictions:
        if p["id"] not in base_em:
            missing += 1
            continue
        skipped.append(int(p["retrievals"]) == 0)
        known.append(base_em[p["id"]] > 0.0)
    c = confusion(skipped, known)
    scores = {k: round(v, 6) for k, v in boundary_scores(c).items()}
    return {"n": c.n, "missing_in_baseline": missing, "tp": c.tp, "fp": c.fp, "fn": c.fn, "tn": c.tn, **scores}
