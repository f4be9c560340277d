"""Build a retriever by name over a BM25 index directory: ``bm25``, ``dense``, ``hybrid``, ``milvus``.

Used by `dynrag eval-retrieval`, `dynrag ask` and `dynrag eval` (``--retriever NAME --option ...``),
so every command picks its retriever the same way. The dense part (``INDEX/dense``) and the Milvus
collection are built from the index's passages on first use and reused afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dynrag.errors import ConfigError, DynragError
from dynrag.retrieval.base import Retriever

RETRIEVERS = ("bm25", "dense", "hybrid", "milvus")

OPTION_KEYS: dict[str, dict[str, type]] = {
    "bm25": {"backend": str},
    "dense": {"embedding_model": str, "batch_size": int, "backend": str},
    "hybrid": {
        "alpha": float, "fusion": str, "candidates": int, "embedding_model": str,
        "batch_size": int, "bm25_backend": str, "dense_backend": str,
    },
    "milvus": {
        "mode": str, "ranker": str, "alpha": float, "candidates": int, "uri": str,
        "collection": str, "embedding_model": str, "batch_size": int,
    },
}


def _check_name(name: str) -> None:
    if name not in RETRIEVERS:
        raise ConfigError(f"unknown retriever {name!r}; choose one of: {', '.join(RETRIEVERS)}")


def parse_retriever_options(retriever: str, pairs: Sequence[str], flag: str = "--option") -> dict[str, Any]:
    """``["alpha=0.3", ...]`` -> typed options valid for ``retriever``; errors name ``flag``."""
    _check_name(retriever)
    allowed = OPTION_KEYS[retriever]
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ConfigError(f"{flag} {pair!r}: expected KEY=VALUE")
        if key not in allowed:
            raise ConfigError(
                f"{flag} {key}: not an option of retriever {retriever!r} "
                f"(options: {', '.join(sorted(allowed)) or 'none'})"
            )
        try:
            out[key] = allowed[key](value.strip())
        except ValueError as e:
            raise ConfigError(f"{flag} {pair!r}: {key} must be a {allowed[key].__name__}") from e
    return out


def open_retriever(
    name: str,
    index_dir: Path,
    options: dict[str, Any],
    *,
    work_dir: Path,
    progress: bool = True,
) -> Retriever:
    """A retriever over a BM25 index directory; the dense part is built next to it when missing
    (``index_dir/dense``), and the Milvus collection from the index's passages when missing. Over
    a small-to-big index it searches the small chunks and returns their large chunks."""
    from dynrag.retrieval.small_to_big import SmallToBigRetriever, is_small_to_big, load_parents
    from dynrag.retrieval.store import read_manifest

    _check_name(name)
    small_to_big = Path(index_dir).is_dir() and is_small_to_big(read_manifest(index_dir))
    parents = load_parents(index_dir) if small_to_big else None  # a missing file fails before any embedding
    retriever = _open_plain(name, index_dir, options, work_dir=work_dir, progress=progress)
    return SmallToBigRetriever(retriever, parents) if parents is not None else retriever


def _open_plain(name: str, index_dir: Path, options: dict[str, Any], *, work_dir: Path, progress: bool) -> Retriever:
    """``name`` is one of RETRIEVERS (checked by the caller)."""
    from dynrag.retrieval.bm25 import BM25Index

    if name == "bm25":
        return BM25Index.load(index_dir, backend=options.get("backend", "auto"))
    embedder = _embedder(options)
    if name in ("dense", "hybrid"):
        from dynrag.retrieval.dense import DenseIndex

        backend = options.get("backend" if name == "dense" else "dense_backend", "auto")
        dense = _dense(index_dir, embedder, backend, options.get("batch_size", 64), progress)
        if name == "dense":
            return dense
        from dynrag.retrieval.hybrid import HybridRetriever

        bm25 = BM25Index.load(index_dir, backend=options.get("bm25_backend", "auto"))
        return HybridRetriever(
            bm25, dense, alpha=options.get("alpha", 0.3), fusion=options.get("fusion", "minmax"),
            candidates=options.get("candidates", 50),
        )
    # the one name left: milvus
    from dynrag.retrieval.milvus import MilvusRetriever

    with BM25Index.load(index_dir, backend="numpy") as bm25:
        sha = bm25.manifest["corpus_sha256"]
        count = len(bm25)
        uri = options.get("uri") or str(work_dir / "milvus.db")
        collection = options.get("collection") or f"dynrag_{sha[:16]}"
        search = {k: options[k] for k in ("mode", "ranker", "alpha", "candidates") if k in options}
        if embedder is None:
            from dynrag.retrieval.embedder import Embedder

            embedder = Embedder.load()
        try:
            retriever = MilvusRetriever.open(uri, collection, embedder, **search)
            if len(retriever) == count:
                return retriever
            retriever.close()
        except DynragError:
            pass
        return MilvusRetriever.build(
            (bm25.passage(i) for i in range(count)), uri, collection, embedder,
            batch_size=options.get("batch_size", 64), progress=progress, total=count, **search,
        )


def _embedder(options: dict[str, Any]) -> Any:
    if "embedding_model" not in options:
        return None
    from dynrag.retrieval.embedder import Embedder

    return Embedder.load(options["embedding_model"])


def _dense(index_dir: Path, embedder: Any, backend: Any, batch_size: int, progress: bool) -> Any:
    """The dense part of ``index_dir``, (re)built when missing, stale or made by another model."""
    from dynrag.retrieval.dense import DenseIndex

    try:
        dense = DenseIndex.load(index_dir, embedder, backend=backend)
        if embedder is None or dense.manifest["embedding_model"] == embedder.name:
            dense.batch_size = batch_size
            return dense
        dense.close()
    except DynragError:  # missing, stale, or built by a model of another dimension: rebuild
        pass
    if embedder is None:
        from dynrag.retrieval.embedder import Embedder

        embedder = Embedder.load()
    DenseIndex.build_alongside(index_dir, embedder, batch_size=batch_size, progress=progress)
    dense = DenseIndex.load(index_dir, embedder, backend=backend)
    dense.batch_size = batch_size
    return dense


def with_numpy_bm25(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the BM25 part on the numpy backend unless the user chose one: numba's JIT
    costs 6-12 s per process, more than it saves when each question then spends seconds generating."""
    key = {"bm25": "backend", "hybrid": "bm25_backend"}.get(name)
    return {key: "numpy", **options} if key else dict(options)
