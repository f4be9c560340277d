"""Stand-ins shared by the tests: fast, deterministic, with the interfaces of the real parts."""

from __future__ import annotations

import hashlib

import numpy as np

from dynrag.retrieval.base import BatchSearch, Hit


class HashEmbedder:
    """Bag-of-words hashed into ``dim`` buckets, L2-normalised: fast, deterministic, and texts that
    share words are similar. Same interface as dynrag.retrieval.embedder.Embedder."""

    def __init__(self, dim: int = 16, name: str = "hash-embedder"):
        self.dimension = dim
        self.name = name
        self.calls = 0

    def encode(self, texts, batch_size: int = 64, progress: bool = False) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                h = int(hashlib.md5(w.strip(".,?!\"'").encode()).hexdigest(), 16)
                out[i, h % self.dimension] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


class ScriptedRetriever(BatchSearch):
    """Returns a fixed ranking per query text (ids only; title and text empty, score 1.0) and
    records every query it was asked, in order."""

    def __init__(self, rankings: dict[str, list[str]]):
        self.rankings = rankings
        self.queries: list[str] = []

    def search_batch(self, queries, k):
        self.queries.extend(queries)
        return [[Hit(pid, "", "", 1.0) for pid in self.rankings.get(q, [])[:k]] for q in queries]
