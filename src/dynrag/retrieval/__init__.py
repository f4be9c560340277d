"""Retrievers: the Retriever protocol and its Hit record (base), the passage store every local
index shares (manifest, passage_lines, store, store_writer, stored_hits), BM25 (tokenizer,
bm25_build, bm25), dense (vectors, embedder, dense), the `dynrag index` build of both
(index_build), hybrid, milvus, small-to-big, HyDE, and the registry that opens one by name
(factory)."""

from typing import Any

from dynrag.retrieval.base import Hit, Retriever

__all__ = ["BM25Index", "Hit", "Retriever"]


def __getattr__(name: str) -> Any:
    # BM25Index imports bm25s (half a second): only when asked for, so `dynrag --help` and the
    # registries stay cheap to import.
    if name == "BM25Index":
        from dynrag.retrieval.bm25 import BM25Index

        return BM25Index
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
