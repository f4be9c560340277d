"""Gold decompositions of multi-hop questions, read from each dataset's own field.

One form for all: a list of sub-questions in which ``#k`` stands for the answer of the k-th one,
and ``SUBJECT >> relation`` is a knowledge-base hop ("Hello Love >> performer"), as MuSiQue
writes some of its steps.

- MuSiQue ``question_decomposition [{question, answer, ...}]``: the questions as written.
- StrategyQA ``decomposition [str]``: as written.
- 2WikiMultihopQA ``evidences [[subject, relation, object]]``: each triple becomes
  ``subject >> relation``; a subject that is the object of an earlier triple becomes ``#k``
  (compared without case, punctuation or a parenthesised qualifier: "Mark Robson (film
  director)" is the "Mark Robson" found before), so no hop names an answer it should find.

The gold intermediate answers are never kept: a decomposition says what to ask, not what to answer.
"""

from __future__ import annotations

import re
from typing import Any

from dynrag.datasets.metrics import normalize_answer
from dynrag.datasets.records import BadRecord

_QUALIFIER = re.compile(r"\s*\([^)]*\)")


def _entity_key(name: str) -> str:
    return normalize_answer(_QUALIFIER.sub("", name))


def musique_decomposition(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadRecord("field 'question_decomposition' must be a list")
    out = []
    for i, step in enumerate(value):
        if not isinstance(step, dict) or not isinstance(step.get("question"), str):
            raise BadRecord(f"question_decomposition[{i}] needs a 'question' string")
        if step["question"].strip():
            out.append(" ".join(step["question"].split()))
    return out


def strategyqa_decomposition(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise BadRecord("field 'decomposition' must be a list of strings")
    return [" ".join(s.split()) for s in value if s.strip()]


def evidence_decomposition(value: Any) -> list[str]:
    """2WikiMultihopQA evidence triples as KB hops, later hops referring back with ``#k``."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadRecord("field 'evidences' must be a list of [subject, relation, object]")
    hops: list[str] = []
    objects: list[str] = []  # object key of each kept hop, in order
    for i, triple in enumerate(value):
        if not (isinstance(triple, (list, tuple)) and len(triple) == 3 and all(isinstance(t, str) for t in triple)):
            raise BadRecord(f"evidences[{i}] must be [subject, relation, object]")
        subject, relation, obj = (" ".join(t.split()) for t in triple)
        key = _entity_key(subject)
        earlier = [k for k, o in enumerate(objects, 1) if o and o == key]
        hop = f"{'#' + str(earlier[0]) if earlier else subject} >> {relation}"
        if hop in hops:
            continue  # a second value of the same hop ("country of citizenship" twice)
        hops.append(hop)
        objects.append(_entity_key(obj))
    return hops
