"""The record every benchmark loader produces, and what loading leaves out."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from dynrag.corpus.passage import Passage


@dataclass(frozen=True)
class Hop:
    """One hop of a generated world's question: the entity it asks about and whether the probed
    model knows the fact (None: not probed)."""

    entity: str
    known: bool | None


@dataclass(frozen=True)
class QAExample:
    id: str
    question: str
    answers: list[str]  # gold answer first, then aliases
    contexts: list[Passage] = field(default_factory=list)
    supporting: list[str] = field(default_factory=list)  # ids of supporting passages in contexts
    # Gold sub-questions ("#k" = answer of the k-th), where the dataset has them (datasets/decomposition.py).
    decomposition: list[str] = field(default_factory=list)
    needs_retrieval: bool | None = None  # a generated world's ground truth: some hop is unknown to the model
    hops: list[Hop] = field(default_factory=list)  # a generated world's hops, in order (empty elsewhere)


@dataclass
class LoadReport:
    """What loading left out: bad records (with --skip-bad) and excluded ones (e.g. unanswerable)."""

    skipped: int = 0
    messages: list[str] = field(default_factory=list)
    excluded: dict[str, int] = field(default_factory=dict)

    def skip(self, message: str) -> None:
        self.skipped += 1
        if len(self.messages) < 20:
            self.messages.append(message)

    def exclude(self, reason: str) -> None:
        self.excluded[reason] = self.excluded.get(reason, 0) + 1


def passage_key(title: str, text: str) -> str:
    """The stable id of a context paragraph: a hash of its whitespace-normalised title and text."""
    norm = " ".join(title.split()) + "\n" + " ".join(text.split())
    return "ctx-" + hashlib.sha1(norm.encode("utf-8")).hexdigest()[:16]


def make_passage(title: str, text: str) -> Passage:
    title, text = " ".join(title.split()), " ".join(text.split())
    return Passage(passage_key(title, text), title, text)
