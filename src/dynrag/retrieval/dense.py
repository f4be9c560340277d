"""Dense retrieval: sentence-embedding vectors in a memory-mapped float32 file, exact inner-product
search (numpy, or faiss's IndexFlatIP when faiss is importable).

One index directory can hold both retrievers, so hybrid search needs a single ``--corpus DIR``:

  DIR/                     a BM25 index (see bm25.py): manifest.json, passages.jsonl, offsets.npy ...
  DIR/dense/manifest.json  format "dynrag-dense", "passages": "parent"
  DIR/dense/vectors.npy    float32 (count, dimension), row i = passage i of DIR/passages.jsonl

``dynrag index SOURCE --out DIR --dense`` builds both (``index_build.build_index``: the BM25 part, then the
dense part, in one temporary directory swapped into place once, so a crash at any moment leaves
the old index whole); ``DenseIndex.build_alongside(DIR, ...)`` adds (or refreshes) the dense part
of an existing BM25 index (atomically: ``DIR/.dense.build-*`` until complete), reading the passages
the BM25 index stored, so both parts always have the same rows (chunking included) and passages
are stored once. A dense build announces itself on stderr with the passage count and an ETA
measured on its first batch, then shows a progress bar. The dense manifest records the parent's
``corpus_sha256``; a dense part left over from an older corpus is refused on load.

A standalone dense index (``DenseIndex.build(passages, DIR, ...)``) stores its own passages in a
passage store (store.py: passages.jsonl, offsets.npy, fields.npy; "passages": "self"), written by
the same writer as a BM25 index's, so the same corpus gives the same ``corpus_sha256`` in either
kind of index.

Search is exact: a blocked numpy matmul over the memory-mapped vectors (memory bounded by the
block, not the corpus), or, with ``backend="faiss"`` (or "auto" when faiss is importable), a faiss
IndexFlatIP holding a copy of the vectors in RAM. Vectors are L2-normalised, so the inner product
is the cosine similarity. Builds stream: passages
are embedded a batch at a time and appended to vectors.npy behind a fixed-size .npy header that is
rewritten with the final row count at the end, so memory holds one batch whatever the corpus size.
Everything is written into a temporary sibling directory renamed into place when complete.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

import dynrag
from dynrag.corpus.passage import Passage
from dynrag.errors import DynragError, IndexDirError
from dynrag.io.directories import atomic_directory
from dynrag.io.files import atomic_write_json
from dynrag.progress import duration, notice, stderr_bar
from dynrag.retrieval.base import Hit, without_blank_queries
from dynrag.retrieval.manifest import INDEX_FORMAT, check_manifest, load_manifest_json, read_manifest
from dynrag.retrieval.store import PassageStore, StoreBacked
from dynrag.retrieval.store_writer import PassageWriter, check_replaceable
from dynrag.retrieval.vectors import exact_top_k, faiss_available, faiss_index, npy_header

if TYPE_CHECKING:
    from dynrag.retrieval.embedder import Embedder

FORMAT = "dynrag-dense"
FORMAT_VERSION = 1
DENSE_SUBDIR = "dense"
VECTORS = "vectors.npy"
PACKAGED_MODEL_NAME = "all-MiniLM-L6-v2"

Backend = Literal["auto", "numpy", "faiss"]

_BUILD_BATCH = 1024  # passages embedded per step (the embedder sorts each by length)
_FIRST_BATCH = 64  # a first, timed batch: the ETA of the announcement


class DenseIndex(StoreBacked):
    """A dense index opened for search; build one with ``build`` or ``build_alongside``."""

    def __init__(
        self,
        path: Path,
        manifest: dict[str, Any],
        vectors: np.ndarray,
        store: PassageStore,
        embedder: Embedder,
        backend: Backend = "auto",
    ):
        self.path = path
        self._manifest = manifest
        self.vectors = vectors
        self._n = int(manifest["count"])
        self.embedder = embedder
        self.store = store
        self._faiss = faiss_index(vectors) if backend == "faiss" or (backend == "auto" and faiss_available()) else None
        self.batch_size = 64

    # ---- building -------------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        passages: Iterable[Passage],
        out_dir: str | Path,
        embedder: Embedder,
        *,
        batch_size: int = 64,
        progress: bool = True,
        total: int | None = None,
    ) -> dict[str, Any]:
        """Embed a stream of passages into a standalone index at ``out_dir``; return its manifest.

        Memory holds one batch of passages and their vectors; passages go straight to
        passages.jsonl and vectors to vectors.npy. ``out_dir`` is replaced atomically.
        """
        return _atomic_build(
            Path(out_dir).absolute(),
            lambda tmp: _write(passages, tmp, embedder, batch_size, progress, total, own_passages=True),
        )

    @classmethod
    def build_alongside(
        cls,
        index_dir: str | Path,
        embedder: Embedder,
        *,
        batch_size: int = 64,
        progress: bool = True,
    ) -> dict[str, Any]:
        """Add the dense part (``index_dir/dense``) to a BM25 index directory, replacing any
        earlier one only when complete; its rows are the BM25 index's passages, read back from its
        files."""
        parent = Path(index_dir).absolute()
        return _atomic_build(
            parent / DENSE_SUBDIR,
            lambda tmp: write_dense_part(parent, embedder, batch_size=batch_size, progress=progress, target=tmp),
        )

    # ---- loading --------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        index_dir: str | Path,
        embedder: Embedder | None = None,
        *,
        backend: Backend = "auto",
        mmap: bool = True,
    ) -> DenseIndex:
        """Open a dense index: a standalone one, a ``dense/`` part, or a BM25 index directory
        holding a ``dense/`` part. Without ``embedder`` the model named by the manifest is loaded
        (the packaged all-MiniLM-L6-v2, or the model directory the index was built with)."""
        given = Path(index_dir)
        if not given.is_dir():
            raise _index_error(given, "no such index directory")
        path = given
        if not (given / VECTORS).exists() and (given / DENSE_SUBDIR).is_dir():
            path = given / DENSE_SUBDIR
        manifest = _read_manifest(path, given)
        if backend not in ("auto", "numpy", "faiss"):
            raise DynragError(f"unknown dense backend {backend!r}; use auto, numpy or faiss")
        count, dim = manifest["count"], manifest["dimension"]
        passages_dir = path.parent if manifest["passages"] == "parent" else path
        if manifest["passages"] == "parent":
            _check_parent(path, manifest)
        try:
            vectors = np.load(path / VECTORS, mmap_mode="r" if mmap else None, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise _index_error(path, f"{VECTORS} unreadable ({e})") from e
        if vectors.dtype != np.float32 or vectors.shape != (count, dim):
            raise _index_error(
                path, f"{VECTORS} is {vectors.dtype} {vectors.shape}, manifest says float32 ({count}, {dim})"
            )
        store = PassageStore.open(
            passages_dir, count, mmap=mmap,
            error=lambda what: _index_error(path, f"passages in {passages_dir} do not match the {count} vectors ({what})"),
        )
        try:
            if embedder is None:
                embedder = _load_embedder(manifest)
            elif embedder.dimension != dim:
                raise DynragError(
                    f"{path}: the index holds {dim}-dimensional vectors but the embedding model "
                    f"gives {embedder.dimension}; use the model it was built with ({manifest['embedding_model']})"
                )
            if backend == "faiss" and not faiss_available():
                raise DynragError("dense backend 'faiss' requested but faiss is not installed (pip install faiss-cpu)")
        except BaseException:
            store.close()
            raise
        return cls(path, manifest, vectors, store, embedder, backend)

    # ---- searching ------------------------------------------------------------------------

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        return self.embedder.encode(list(queries), batch_size=self.batch_size)

    def search_batch(self, queries: list[str], k: int) -> list[list[Hit]]:
        return without_blank_queries(queries, lambda texts: self.search_vectors(self.encode_queries(texts), k))

    def search_vectors(self, query_vectors: np.ndarray, k: int) -> list[list[Hit]]:
        """Top-k hits for already-encoded (L2-normalised) query vectors, best first."""
        return self.store.hit_lists(*self.top_k(query_vectors, k))

    def top_k(self, query_vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores), each (n_queries, min(k, count)), sorted best first."""
        q = np.ascontiguousarray(query_vectors, dtype=np.float32)
        if q.ndim != 2 or q.shape[1] != self.vectors.shape[1]:
            raise DynragError(f"query vectors have shape {q.shape}, the index has dimension {self.vectors.shape[1]}")
        k = min(k, self._n)
        if k <= 0 or len(q) == 0:
            return np.zeros((len(q), 0), np.int64), np.zeros((len(q), 0), np.float32)
        if self._faiss is not None:
            scores, rows = self._faiss.search(q, k)
            return rows.astype(np.int64), scores
        return exact_top_k(self.vectors, q, k)

    # ---- misc (len, manifest, passage, close: StoreBacked) ------------------------------

    @property
    def backend(self) -> str:
        return "faiss" if self._faiss is not None else "numpy"


# ---- building helpers -------------------------------------------------------------------------


def write_dense_part(
    index_dir: Path,
    embedder: Embedder,
    *,
    batch_size: int = 64,
    progress: bool = True,
    target: Path | None = None,
    shown: Path | None = None,
) -> dict[str, Any]:
    """Embed the passages of the BM25 index in ``index_dir`` into ``target`` (default
    ``index_dir/dense``, written in place: call it on a directory under construction); returns
    the dense manifest. ``shown`` is the path the announcement names (the final one)."""
    index_dir = Path(index_dir)
    parent = read_manifest(index_dir)
    count = parent["passage_count"]
    target = target or index_dir / DENSE_SUBDIR
    target.mkdir(exist_ok=True)
    with PassageStore.open(index_dir, count) as store:
        rows = (store.passage(i) for i in range(count))
        announce = _announcer(count, embedder.name, shown or index_dir / DENSE_SUBDIR)
        manifest = _write(rows, target, embedder, batch_size, progress, count, own_passages=False, announce=announce)
    if manifest["corpus_sha256"] != parent["corpus_sha256"]:
        # Passages re-encoded by the same line encoder must hash the same; if not, the files
        # changed under us. Refuse rather than leave a misaligned part behind.
        raise _index_error(index_dir, "passages.jsonl changed while the dense part was built")
    return manifest


def _announcer(count: int, model: str, shown: Path) -> Any:
    def announce(rate: float, measured: int) -> None:
        eta = (count - measured) / rate if rate > 0 else float("inf")
        notice(
            f"building the dense part: embedding {count:,} passages with {model} into {shown}, "
            f"about {duration(eta)} at {rate:,.0f} passages/s (measured on the first {measured}); "
            "nothing is replaced until it is complete"
        )
    return announce


def _atomic_build(out: Path, write: Any) -> dict[str, Any]:
    with atomic_directory(out, check=check_replaceable) as tmp:
        return write(tmp)


def _write(
    passages: Iterable[Passage],
    tmp: Path,
    embedder: Embedder,
    batch_size: int,
    progress: bool,
    total: int | None,
    *,
    own_passages: bool,
    announce: Any = None,
) -> dict[str, Any]:
    """``announce(passages_per_second, measured)``, when given, is called once after a small
    first batch, timed, so the build can say how long it will take before it takes it."""
    dim = embedder.dimension
    store = PassageWriter(tmp if own_passages else None)
    with open(tmp / VECTORS, "wb") as vec_out, stderr_bar(total, "Embedding", progress) as bar:
        vec_out.write(npy_header(0, dim))  # placeholder, rewritten with the real count below

        def flush(batch: list[Passage]) -> None:
            store.add(batch)
            vectors = embedder.encode([_embed_text(p) for p in batch], batch_size=batch_size)
            if vectors.shape != (len(batch), dim):
                raise DynragError(f"embedding model returned {vectors.shape}, expected ({len(batch)}, {dim})")
            vec_out.write(np.ascontiguousarray(vectors, dtype="<f4").tobytes())
            bar.update(len(batch))

        try:
            batch: list[Passage] = []
            size = _FIRST_BATCH if announce is not None else _BUILD_BATCH
            for p in passages:
                batch.append(p)
                if len(batch) == size:
                    started = time.perf_counter()
                    flush(batch)
                    if announce is not None:
                        announce(len(batch) / max(time.perf_counter() - started, 1e-9), len(batch))
                        announce = None
                    batch, size = [], _BUILD_BATCH
            if batch:
                flush(batch)
        finally:
            store.close()
        store.finish()
        count = store.count
        vec_out.seek(0)
        vec_out.write(npy_header(count, dim))
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "count": count,
        "dimension": dim,
        "dtype": "float32",
        "normalized": True,
        "embedding_model": embedder.name,
        "embedding_model_path": _model_path(embedder),
        "embedded_text": "title + newline + text",
        "passages": "self" if own_passages else "parent",
        "corpus_sha256": store.sha256,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "dynrag_version": dynrag.__version__,
    }
    atomic_write_json(tmp / "manifest.json", manifest)
    return manifest


def _model_path(embedder: Embedder) -> str | None:
    if embedder.name == PACKAGED_MODEL_NAME:
        return None
    path = Path(embedder.name)
    return str(path.resolve()) if path.exists() else embedder.name


def _embed_text(p: Passage) -> str:
    return f"{p.title}\n{p.text}" if p.title else p.text


# ---- loading helpers --------------------------------------------------------------------------


REBUILD = "rebuild it with `dynrag index SOURCE --out DIR --dense`"


def _index_error(path: Path, what: str) -> IndexDirError:
    return IndexDirError(f"{path}: {what}; {REBUILD}")


def _read_manifest(path: Path, given: Path) -> dict[str, Any]:
    manifest = load_manifest_json(path, "no dense index here (no dense/ part and no manifest.json)", REBUILD)
    if manifest.get("format") == INDEX_FORMAT:
        raise _index_error(given, "this BM25 index has no dense part")
    check_manifest(manifest, path, format=FORMAT, version=FORMAT_VERSION, count_key="count", rebuild=REBUILD)
    dimension = manifest.get("dimension")
    if not isinstance(dimension, int) or isinstance(dimension, bool) or dimension < 1:
        raise _index_error(path, f"manifest.json dimension {dimension!r} is invalid")
    if manifest.get("passages") not in ("self", "parent"):
        raise _index_error(path, f"manifest.json passages {manifest.get('passages')!r} is invalid")
    return manifest


def _check_parent(path: Path, manifest: dict[str, Any]) -> None:
    try:
        parent = read_manifest(path.parent)
    except IndexDirError as e:
        raise _index_error(path, f"its parent index manifest is unreadable ({e})") from e
    if parent.get("corpus_sha256") != manifest["corpus_sha256"] or parent.get("passage_count") != manifest["count"]:
        raise _index_error(path, "dense part is stale: it was built for another corpus than its parent index")


def _load_embedder(manifest: dict[str, Any]) -> Embedder:
    from dynrag.retrieval.embedder import Embedder

    model_path = manifest.get("embedding_model_path")
    return Embedder.load(model_path) if model_path else Embedder.load()
