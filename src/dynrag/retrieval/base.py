"""The Retriever protocol, the Hit record it returns, and the base most retrievers share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class Hit:
    id: str
    title: str
    text: str
    score: float

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "title": self.title, "text": self.text, "score": float(self.score)}


@dataclass(frozen=True)
class RetrieverTraits:
    """What a retriever needs, read from its registry entry before it is opened."""

    # False for a retriever whose passages live in a search server: it takes no index directory.
    needs_index: bool = True
    # The option naming its bm25s backend, if it has a BM25 part (see factory.with_numpy_bm25).
    bm25_backend_key: str | None = None


@runtime_checkable
class Retriever(Protocol):
    def search(self, query: str, k: int) -> list[Hit]: ...

    def search_batch(self, queries: list[str], k: int) -> list[list[Hit]]: ...


class BatchSearch:
    """Base of retrievers that implement ``search_batch``: ``search`` is its one-query case, and
    ``close`` (a no-op unless overridden) makes each usable in a ``with`` block."""

    def search(self, query: str, k: int) -> list[Hit]:
        return self.search_batch([query], k)[0]

    def search_batch(self, queries: list[str], k: int) -> list[list[Hit]]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def without_blank_queries(
    queries: list[str], search: Callable[[list[str]], list[list[Hit]]]
) -> list[list[Hit]]:
    """``search`` over the queries that have text; a blank query matches nothing and gets []
    (as BM25 gives it), where an embedding of no text would return arbitrary passages."""
    keep = [i for i, q in enumerate(queries) if q.strip()]
    out: list[list[Hit]] = [[] for _ in queries]
    if keep:
        for i, hits in zip(keep, search([queries[i] for i in keep])):
            out[i] = hits
    return out


def close_retriever(retriever: Any) -> None:
    """Close a retriever that holds resources (files, a database client); others have no close."""
    close = getattr(retriever, "close", None)
    if close is not None:
        close()
