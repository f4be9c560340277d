"""Retrieval decisions against a world's ground truth: a question should be answered without
retrieval exactly when none of its hops is unknown to the model (``needs_retrieval`` false).

The figures take DeepRAG's positive class (``eval/boundary.py``): positive = the method did not
retrieve, truth = the question did not need it; so a method that always retrieves scores F1 0,
and its accuracy is the share of questions that need retrieval.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dynrag.eval.boundary import boundary_scores, confusion


def retrieval_decisions(predictions: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The 2x2 counts and figures over prediction records that carry ``needs_retrieval``."""
    rows = [p for p in predictions if p.get("needs_retrieval") is not None]
    c = confusion([int(p["retrievals"]) == 0 for p in rows], [not p["needs_retrieval"] for p in rows])
    needing = sum(1 for p in rows if p["needs_retrieval"])
    return {"n": c.n, "need_retrieval": needing, "tp": c.tp, "fp": c.fp, "fn": c.fn, "tn": c.tn,
            **{k: round(v, 6) for k, v in boundary_scores(c).items()}}
