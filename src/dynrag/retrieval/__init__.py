"""Retrievers: the Retriever protocol and its Hit record (base), the passage store every local
index shares (store), BM25 (tokenizer, bm25_build, bm25), dense (vectors, embedder, dense),
hybrid, milvus, small-to-big, HyDE, and the registry that opens one by name (factory)."""

from dynrag.retrieval.base import Hit, Retriever
from dynrag.retrieval.bm25 import BM25Index

__all__ = ["BM25Index", "Hit", "Retriever"]
