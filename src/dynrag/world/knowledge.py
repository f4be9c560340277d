"""What a model knows of the world, fact by fact: the probe's verdicts read as ground truth.

A real fact answered right in all three probe phrasings is ``known``, wrong in all three
``unknown``, anything between ``left_out`` (no question chains it). Fictional facts are always
unknown. Without a probed model (``model`` None) real facts are unprobed: ``known`` is None and
every fact may be chained.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from dynrag.world.entities import Fact

VERDICTS = ("known", "unknown", "left_out")


def verdict(correct: Sequence[bool]) -> str:
    """The verdict of one fact from whether each of its phrasings was answered right."""
    if not correct:
        raise ValueError("a verdict needs at least one answered phrasing")
    if all(correct):
        return "known"
    return "unknown" if not any(correct) else "left_out"


@dataclass(frozen=True)
class Knowledge:
    model: str | None = None
    status: dict[str, str] = field(default_factory=dict)  # real fact id -> known | unknown | left_out

    def known(self, fact: Fact) -> bool | None:
        if not fact.real:
            return False
        if self.model is None:
            return None
        return self.status.get(fact.id) == "known"

    def usable(self, fact: Fact) -> bool:
        """May a question chain this fact? (Not when the probe left it out or never asked it.)"""
        if not fact.real or self.model is None:
            return True
        return self.status.get(fact.id) in ("known", "unknown")


def needs_retrieval(known: Sequence[bool | None]) -> bool | None:
    """A question needs retrieval when any hop is unknown; None when no hop is and some is unprobed."""
    if any(k is False for k in known):
        return True
    return None if any(k is None for k in known) else False
