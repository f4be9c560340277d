"""Shared fixtures: the real packaged embedder (loaded once) and a tiny deterministic one."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from dynrag.corpus import Passage

CORPUS = [
    Passage("rush", "Rush (band)", "Rush was a Canadian rock band formed in Toronto in 1968."),
    Passage("peart", "Neil Peart", "Neil Peart was the drummer and lyricist of the band Rush."),
    Passage("paris", "Paris", "Paris is the capital and most populous city of France."),
    Passage("berlin", "Berlin", "Berlin is the capital and largest city of Germany."),
    Passage("bees", "Honey bee", "Honey bees are eusocial flying insects within the genus Apis."),
    Passage("quotes", 'The "Quoted" Title', 'He said "hello"\\back\nslash\ttab and left.'),
    Passage("unicode", "Zürich", "Zürich — the largest city in Switzerland — sits on a lake."),
    Passage("eiffel", "Eiffel Tower", "A wrought-iron lattice tower on the Champ de Mars."),
]


@pytest.fixture(scope="session")
def embedder():
    from dynrag.retrieval.embedder import Embedder

    return Embedder.load()


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


@pytest.fixture
def hash_embedder():
    return HashEmbedder()
