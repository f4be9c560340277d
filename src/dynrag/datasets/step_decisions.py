"""The retrieve-or-answer decisions a method wrote, read from its answer's trace (pure).

A method that writes explicit sub-questions (``deeprag``) marks each step that answers one with
``subquery`` and ``decision`` (retrieve | parametric). Every dataset's records keep them (DeepRAG's
Figure 7 counts them on real benchmarks); a world also scores them hop by hop
(``datasets/world_hops.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

DECISIONS = ("retrieve", "parametric")


def step_decisions(steps: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """``[{subquery, retrieve}]`` in step order, from an answer's trace steps (``Answer.to_dict()``):
    every step whose details carry a ``subquery`` string and a ``decision`` among DECISIONS."""
    out = []
    for step in steps or ():
        details = step.get("details") or {}
        if isinstance(details.get("subquery"), str) and details.get("decision") in DECISIONS:
            out.append({"subquery": details["subquery"], "retrieve": details["decision"] == DECISIONS[0]})
    return out
