"""Retrieval decisions hop by hop, against a world's ground truth (pure functions).

A method that writes explicit sub-questions (``deeprag``) makes one decision per sub-question
(``datasets/step_decisions.py`` reads them from its trace). The k-th decision is matched to the
k-th hop of the question, in order; decisions beyond the question's hops are *extra*, hops beyond
the decisions are *missing*, and neither enters the 2x2 table: they are counted beside it
(``extra_decisions`` and how many of them retrieved, ``missing_decisions`` and how many of those
hops were unknown). A matched hop whose fact was not
probed (``known`` null) is counted as ``no_truth`` and left out too.

The table here takes "retrieved" as the positive prediction and "this hop's fact is unknown" as the
positive truth: TP retrieved an unknown fact, FP retrieved a known one, FN answered an unknown fact
from memory, TN answered a known one from memory. (The question-level table of
``datasets/world_decisions.py`` keeps DeepRAG's opposite positive class; MCC is the same either way.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dynrag.datasets.boundary import mcc


def ratio(num: int, den: int) -> float | None:
    """num / den rounded to 6 places; None when den is 0 (precision with nothing retrieved, recall
    with no unknown hop)."""
    return round(num / den, 6) if den else None


def hop_confusion(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The per-hop table over prediction records carrying ``hops`` [{entity, known}] and
    ``decisions`` [{subquery, retrieve}], with precision, recall and MCC of "retrieved"."""
    tp = fp = fn = tn = 0
    questions = extra = extra_retrieved = missing = missing_unknown = no_truth = 0
    for r in records:
        hops: Sequence[Mapping[str, Any]] = r.get("hops") or []
        decisions: Sequence[Mapping[str, Any]] = r.get("decisions") or []
        questions += 1
        for hop, decision in zip(hops, decisions):
            if hop.get("known") is None:
                no_truth += 1
            elif decision["retrieve"]:
                tp, fp = (tp + 1, fp) if hop["known"] is False else (tp, fp + 1)
            else:
                fn, tn = (fn + 1, tn) if hop["known"] is False else (fn, tn + 1)
        extra += max(0, len(decisions) - len(hops))
        extra_retrieved += sum(1 for d in decisions[len(hops):] if d["retrieve"])
        missing += max(0, len(hops) - len(decisions))
        missing_unknown += sum(1 for h in hops[len(decisions):] if h.get("known") is False)
    matched = tp + fp + fn + tn
    return {
        "questions": questions, "matched": matched, "tp": tp, "fp": fp, "fn": fn, "tn": tn,
        "precision": ratio(tp, tp + fp), "recall": ratio(tp, tp + fn), "mcc": round(mcc(tp, fp, fn, tn), 6),
        "unknown_share": ratio(tp + fn, matched),  # the precision of retrieving at random
        "extra_decisions": extra, "extra_retrievals": extra_retrieved,
        "missing_decisions": missing, "missing_unknown": missing_unknown, "no_truth": no_truth,
    }


def names_unknown_entity(query: str, hops: Iterable[Mapping[str, Any]]) -> bool:
    """Whether ``query`` names (case-insensitive substring) the entity of a hop whose fact is unknown."""
    text = query.lower()
    return any(h.get("known") is False and str(h.get("entity") or "").lower() in text for h in hops
               if h.get("entity"))


def entity_queries(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Over the retrieval queries of questions that need retrieval: how many name an unknown hop's
    entity, and their share (None without any such query)."""
    queries = naming = 0
    for r in records:
        if r.get("needs_retrieval") is not True:
            continue
        for q in r.get("queries") or []:
            queries += 1
            naming += names_unknown_entity(str(q), r.get("hops") or [])
    return {"queries": queries, "naming_unknown": naming, "share": ratio(naming, queries)}
