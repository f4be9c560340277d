"""Bi-encoder reranking: cosine between the question's and each passage's sentence embedding."""

from __future__ import annotations

import numpy as np

from dynrag.rerank.base import passage_text, ranked
from dynrag.retrieval.base import Hit
from dynrag.retrieval.embedder import Embedder


def cosine_scores(query_vector: np.ndarray, passage_vectors: np.ndarray) -> np.ndarray:
    """Cosine similarity of one query vector with each row (rows need not be normalised)."""
    q = np.asarray(query_vector, dtype=np.float64).ravel()
    p = np.asarray(passage_vectors, dtype=np.float64).reshape(-1, q.size)
    norms = np.linalg.norm(p, axis=1) * np.linalg.norm(q)
    return (p @ q) / np.where(norms == 0, 1.0, norms)


class EmbeddingReranker:
    name = "embedding"

    def __init__(self, embedder: Embedder):
        self.embedder = embedder

    def scores(self, query: str, hits: list[Hit]) -> np.ndarray:
        if not hits:
            return np.zeros(0)
        vectors = self.embedder.encode([query] + [passage_text(h) for h in hits])
        return cosine_scores(vectors[0], vectors[1:])

    def rerank(self, query: str, hits: list[Hit], top_k: int) -> list[Hit]:
        return ranked(hits, self.scores(query, hits), top_k)
