"""Retrievers: the Retriever protocol, its Hit record and the BM25 index."""

from dynrag.retrieval.base import Hit, Retriever
from dynrag.retrieval.bm25 import BM25Index

__all__ = ["BM25Index", "Hit", "Retriever"]
