"""Hybrid retrieval: BM25 and dense candidates fused by min-max normalised scores or by RRF.

Min-max fusion (the best-practices paper's hybrid search): each retriever's top ``candidates``
scores are min-max normalised over that list, then ``S = alpha * S_sparse + S_dense`` over the
union of both lists; a passage missing from one list counts 0 there (the normalised value of that
list's worst candidate, and anything below it). alpha defaults to 0.3, the paper's choice.

Reciprocal-rank fusion: ``S = sum over lists of 1 / (k + rank)`` with ranks from 1 and k = 60
(Cormack et al., 2009); alpha is not used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np

from dynrag.errors import ConfigError
from dynrag.retrieval.base import BatchSearch, Hit, Retriever, close_retriever

Fusion = Literal["minmax", "rrf"]
FUSIONS = ("minmax", "rrf")
DEFAULT_ALPHA = 0.3
RRF_K = 60


def minmax(scores: Sequence[float] | np.ndarray) -> np.ndarray:
    """(x - min) / (max - min) as float64. A constant non-empty list maps to all 1.0 (every
    candidate is as good as the best); an empty one to an empty array."""
    x = np.asarray(scores, dtype=np.float64)
    if x.size == 0:
        return x.copy()
    lo, hi = float(x.min()), float(x.max())
    if hi - lo <= 0.0 or not np.isfinite(hi - lo):
        return np.ones_like(x)
    return (x - lo) / (hi - lo)


def hybrid_scores(
    sparse: Mapping[str, float], dense: Mapping[str, float], alpha: float = DEFAULT_ALPHA
) -> dict[str, float]:
    """``alpha * minmax(sparse) + minmax(dense)`` over the union of the ids; a missing id is 0.

    Keys come out in first-seen order (sparse ids, then dense-only ids)."""
    s_norm = dict(zip(sparse.keys(), minmax(list(sparse.values())).tolist()))
    d_norm = dict(zip(dense.keys(), minmax(list(dense.values())).tolist()))
    return {pid: alpha * s_norm.get(pid, 0.0) + d_norm.get(pid, 0.0) for pid in {**s_norm, **d_norm}}


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    """Reciprocal-rank fusion: ``sum 1 / (k + rank)`` over the rankings an id appears in (rank
    from 1; an id repeated within one ranking counts at its best rank only)."""
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    fused: dict[str, float] = {}
    for ranking in rankings:
        seen: set[str] = set()
        for rank, pid in enumerate(ranking, start=1):
            if pid in seen:
                continue
            seen.add(pid)
            fused[pid] = fused.get(pid, 0.0) + 1.0 / (k + rank)
    return fused


def fuse(
    sparse_hits: Sequence[Hit],
    dense_hits: Sequence[Hit],
    k: int,
    *,
    alpha: float = DEFAULT_ALPHA,
    fusion: Fusion = "minmax",
    rrf_k: int = RRF_K,
) -> list[Hit]:
    """The top-k fused hits of two hit lists, best first (ties: sparse order, then dense order)."""
    passages: dict[str, Hit] = {}
    for h in (*sparse_hits, *dense_hits):
        passages.setdefault(h.id, h)
    if fusion == "minmax":
        scores = hybrid_scores(_best(sparse_hits), _best(dense_hits), alpha)
    elif fusion == "rrf":
        scores = rrf([[h.id for h in sparse_hits], [h.id for h in dense_hits]], rrf_k)
    else:
        raise ConfigError(f"unknown fusion {fusion!r}; use minmax or rrf")
    order = {pid: i for i, pid in enumerate(passages)}
    ranked = sorted(scores, key=lambda pid: (-scores[pid], order[pid]))[:k]
    return [Hit(pid, passages[pid].title, passages[pid].text, scores[pid]) for pid in ranked]


def _best(hits: Sequence[Hit]) -> dict[str, float]:
    out: dict[str, float] = {}
    for h in hits:
        if h.id not in out or h.score > out[h.id]:
            out[h.id] = float(h.score)
    return out


class HybridRetriever(BatchSearch):
    """BM25 + dense over the same corpus: each gives ``candidates`` hits, then they are fused."""

    def __init__(
        self,
        bm25: Retriever,
        dense: Retriever,
        alpha: float = DEFAULT_ALPHA,
        fusion: Fusion = "minmax",
        candidates: int = 50,
        rrf_k: int = RRF_K,
    ):
        if fusion not in FUSIONS:
            raise ConfigError(f"unknown fusion {fusion!r}; use minmax or rrf")
        if not alpha >= 0:
            raise ConfigError(f"alpha must be >= 0, got {alpha}")
        if candidates < 1:
            raise ConfigError(f"candidates must be >= 1, got {candidates}")
        self.bm25 = bm25
        self.dense = dense
        self.alpha = float(alpha)
        self.fusion: Fusion = fusion
        self.candidates = int(candidates)
        self.rrf_k = int(rrf_k)

    def search_batch(self, queries: list[str], k: int) -> list[list[Hit]]:
        if not queries:
            return []
        n = max(self.candidates, k)
        sparse = self.bm25.search_batch(queries, n)
        dense = self.dense.search_batch(queries, n)
        return [
            fuse(s, d, k, alpha=self.alpha, fusion=self.fusion, rrf_k=self.rrf_k)
            for s, d in zip(sparse, dense)
        ]

    def close(self) -> None:
        close_retriever(self.bm25)
        close_retriever(self.dense)
