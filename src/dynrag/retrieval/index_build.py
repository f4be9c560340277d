"""The index ``dynrag index`` builds: a BM25 index and, with an embedder, its dense part, written
into one temporary directory that replaces the old index in one swap."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dynrag.corpus.passage import Passage
from dynrag.retrieval.bm25_build import build_bm25_index
from dynrag.retrieval.dense import DENSE_SUBDIR, write_dense_part

if TYPE_CHECKING:
    from dynrag.retrieval.embedder import Embedder


def build_index(
    passages: Iterable[Passage],
    out_dir: str | Path,
    *,
    embedder: Embedder | None = None,
    chunk: Any = None,
    batch_size: int = 64,
    progress: bool = True,
    total: int | None = None,
    sources: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A BM25 index of ``passages`` at ``out_dir`` and, with an ``embedder``, its dense part: both
    written into one temporary directory that replaces ``out_dir`` only when both are complete.
    Returns (BM25 manifest, dense manifest or None)."""
    dense: list[dict[str, Any]] = []
    out = Path(out_dir).absolute()

    def add_dense(tmp: Path) -> None:
        dense.append(write_dense_part(tmp, embedder, batch_size=batch_size, progress=progress,
                                      shown=out / DENSE_SUBDIR))

    manifest = build_bm25_index(passages, out, progress=progress, chunk=chunk, total=total, sources=sources,
                                add_parts=add_dense if embedder is not None else None)
    return manifest, (dense[0] if dense else None)
