"""Retrieval decisions against a world's ground truth: a question should be answered without
retrieval exactly when none of its hops is unknown to the model (``needs_retrieval`` false).

The question-level figures take DeepRAG's positive class (``datasets/boundary.py``): positive = the
method did not retrieve, truth = the question did not need it; so a method that always retrieves
scores F1 0, and its accuracy is the share of questions that need retrieval. Beside them: mean
retrievals on all-known and on needs-retrieval questions, the share of retrieval queries naming an
unknown hop's entity, EM/F1/retrievals per question group, and, for methods that write explicit
sub-questions, the per-hop table of ``world_hops.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from dynrag.datasets.boundary import boundary_scores, confusion
from dynrag.datasets.examples import QAExample
from dynrag.datasets.step_decisions import step_decisions
from dynrag.datasets.world_hops import entity_queries, hop_confusion

def known_and_unknown(record: Mapping[str, Any]) -> bool:
    """A chain with a hop the model knows and one it must look up: where a method should retrieve
    for one hop and answer the other from memory."""
    known = {h.get("known") for h in record.get("hops") or []}
    return True in known and False in known


# Question groups of the breakdown: name -> which records belong (hop counts add hops_N groups).
GROUPS: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    "multi_hop": lambda r: len(r.get("hops") or []) >= 2,
    "all_known": lambda r: r.get("needs_retrieval") is False,
    "needs_retrieval": lambda r: r.get("needs_retrieval") is True,
    "known_and_unknown": known_and_unknown,
}


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 6) if values else None


def group_figures(records: Sequence[Mapping[str, Any]], scores: Sequence[tuple[float, float]]) -> dict[str, Any]:
    """Per group (``hops_1``, ``hops_2``, ..., then GROUPS): n, EM, F1 and retrievals per question;
    ``scores`` are each record's (EM, F1). Groups without a question are left out."""
    members: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        if r.get("hops"):
            members.setdefault(f"hops_{len(r['hops'])}", []).append(i)
    members = dict(sorted(members.items()))
    for name, belongs in GROUPS.items():
        idx = [i for i, r in enumerate(records) if belongs(r)]
        if idx:
            members[name] = idx
    return {name: {"n": len(idx), "em": _mean([scores[i][0] for i in idx]), "f1": _mean([scores[i][1] for i in idx]),
                   "retrievals_per_question": _mean([float(records[i]["retrievals"]) for i in idx])}
            for name, idx in members.items()}


def retrieval_decisions(predictions: Iterable[Mapping[str, Any]],
                        scores: Sequence[tuple[float, float]] | None = None) -> dict[str, Any]:
    """The decision figures over prediction records that carry ``needs_retrieval``; ``scores``:
    each prediction's (EM, F1) as the run scored it (default: the records' own ``em``/``f1``)."""
    preds = list(predictions)
    scored = list(scores) if scores is not None else [(float(p.get("em", 0.0)), float(p.get("f1", 0.0))) for p in preds]
    keep = [i for i, p in enumerate(preds) if p.get("needs_retrieval") is not None]
    rows = [preds[i] for i in keep]
    c = confusion([int(p["retrievals"]) == 0 for p in rows], [not p["needs_retrieval"] for p in rows])
    needing = sum(1 for p in rows if p["needs_retrieval"])
    out: dict[str, Any] = {
        "n": c.n, "need_retrieval": needing, "tp": c.tp, "fp": c.fp, "fn": c.fn, "tn": c.tn,
        **{k: round(v, 6) for k, v in boundary_scores(c).items()},
        "retrievals_all_known": _mean([float(p["retrievals"]) for p in rows if not p["needs_retrieval"]]),
        "retrievals_needs_retrieval": _mean([float(p["retrievals"]) for p in rows if p["needs_retrieval"]]),
        "entity_queries": entity_queries(rows),
        "groups": group_figures(rows, [scored[i] for i in keep]),
    }
    with_hops = [p for p in rows if p.get("hops") and "decisions" in p]
    if any(p["decisions"] for p in with_hops):  # a method that writes its sub-questions' decisions
        out["per_hop"] = hop_confusion(with_hops)
    return out


def world_record_fields(example: QAExample, answer: Mapping[str, Any]) -> dict[str, Any]:
    """What a prediction record keeps of a world question: whether it needs retrieval, its hops and,
    where the method wrote them, its per-sub-question decisions (empty for a method without
    sub-questions): what the decision figures read."""
    fields: dict[str, Any] = {}
    if example.needs_retrieval is not None:
        fields["needs_retrieval"] = example.needs_retrieval
    if example.hops:
        fields["hops"] = [{"entity": h.entity, "known": h.known} for h in example.hops]
        fields["decisions"] = step_decisions(answer.get("steps"))
    return fields
