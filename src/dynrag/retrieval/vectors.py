"""Vector files and exact search: the .npy layout dense indexes stream into, blocked exact top-k
by inner product in numpy, and the faiss IndexFlatIP alternative."""

from __future__ import annotations

from typing import Any

import numpy as np

from dynrag.errors import DynragError

_HEADER_BYTES = 128  # .npy v1.0 header for a 2-D float32 array of any realistic shape
_SEARCH_BLOCK = 1 << 16  # rows scored at a time: bounds search memory on big corpora


def exact_top_k(vectors: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact maximum-inner-product top-k, scoring ``vectors`` a block of rows at a time.

    Returns (rows int64, scores float32), each (n_queries, k), best first; ties go to the lower row.
    """
    n = len(vectors)
    best_rows = np.zeros((len(queries), 0), dtype=np.int64)
    best_scores = np.zeros((len(queries), 0), dtype=np.float32)
    for start in range(0, n, _SEARCH_BLOCK):
        block = np.asarray(vectors[start : start + _SEARCH_BLOCK])
        scores = queries @ block.T  # (nq, block)
        kk = min(k, scores.shape[1])
        if kk < scores.shape[1]:
            part = np.argpartition(-scores, kk - 1, axis=1)[:, :kk]
        else:
            part = np.broadcast_to(np.arange(scores.shape[1]), scores.shape)
        cand_scores = np.take_along_axis(scores, part, axis=1)
        rows = np.concatenate([best_rows, part + start], axis=1)
        vals = np.concatenate([best_scores, cand_scores], axis=1)
        # Sort by score descending, then row ascending, so results are deterministic.
        order = np.lexsort((rows, -vals), axis=1)[:, :k]
        best_rows = np.take_along_axis(rows, order, axis=1)
        best_scores = np.take_along_axis(vals, order, axis=1)
    return best_rows, best_scores.astype(np.float32, copy=False)


def npy_header(count: int, dim: int) -> bytes:
    """A fixed-size .npy header for a (count, dim) float32 array: written first as a placeholder
    and rewritten with the final count, so vectors can be appended a batch at a time."""
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)), "fortran_order": False,
              "shape": (count, dim)}
    text = repr(header).encode("latin1")
    pad = _HEADER_BYTES - 10 - len(text) - 1
    if pad < 0:
        raise DynragError(f"vector array shape ({count}, {dim}) too large for the .npy header")
    return b"\x93NUMPY\x01\x00" + (_HEADER_BYTES - 10).to_bytes(2, "little") + text + b" " * pad + b"\n"


def faiss_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("faiss") is not None


def faiss_index(vectors: np.ndarray) -> Any:
    import faiss

    index = faiss.IndexFlatIP(vectors.shape[1])
    for start in range(0, len(vectors), _SEARCH_BLOCK):
        index.add(np.ascontiguousarray(vectors[start : start + _SEARCH_BLOCK], dtype=np.float32))
    return index
