"""The Retriever protocol and the Hit record it returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class Hit:
    id: str
    title: str
    text: str
    score: float

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "title": self.title, "text": self.text, "score": float(self.score)}


@runtime_checkable
class Retriever(Protocol):
    def search(self, query: str, k: int) -> list[Hit]: ...

    def search_batch(self, queries: list[str], k: int) -> list[list[Hit]]: ...
