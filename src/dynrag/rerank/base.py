"""The Reranker protocol and the one sort every reranker shares."""

from __future__ import annotations

import dataclasses
from typing import Protocol, Sequence, runtime_checkable

from dynrag.retrieval.base import Hit


@runtime_checkable
class Reranker(Protocol):
    name: str

    def rerank(self, query: str, hits: list[Hit], top_k: int) -> list[Hit]:
        """The `top_k` best hits, each carrying its new score, best first."""
        ...


def ranked(hits: Sequence[Hit], scores: Sequence[float], top_k: int) -> list[Hit]:
    """Hits re-scored with `scores` and sorted by them, best first; ties keep the incoming order
    (the retriever's ranking). Returns at most `top_k` hits."""
    if len(hits) != len(scores):
        raise ValueError(f"{len(hits)} hits but {len(scores)} scores")
    if top_k < 0:
        raise ValueError(f"top_k must be >= 0 (got {top_k})")
    order = sorted(range(len(hits)), key=lambda i: -float(scores[i]))  # sorted() is stable
    return [dataclasses.replace(hits[i], score=float(scores[i])) for i in order[:top_k]]


def passage_text(hit: Hit) -> str:
    """What a reranker reads of a hit: its title and text, whitespace collapsed."""
    text = " ".join(hit.text.split())
    return f"{hit.title}: {text}" if hit.title else text
