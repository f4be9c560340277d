"""BM25 retrieval over bm25s: an index directory opened for fast batch search.

An index directory (no pickle anywhere) is a passage store (store.py: passages.jsonl, offsets.npy,
fields.npy), bm25s's own files (*.index.npy, *.index.json: CSC score matrix, vocabulary,
parameters) and manifest.json (format, version, passage count, corpus checksum, tokenizer
settings). ``BM25Index.build`` (bm25_build.py) writes one; ``BM25Index.load`` opens it with the
score matrix memory-mapped, and queries are tokenised as the passages were (tokenizer.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from dynrag.errors import DynragError, json_error
from dynrag.retrieval.base import Hit
from dynrag.retrieval.bm25_build import build_bm25_index
from dynrag.retrieval.manifest import INDEX_FORMAT, index_error, read_manifest
from dynrag.retrieval.store import PassageStore, StoreBacked
from dynrag.retrieval.tokenizer import BM25Tokenizer

if TYPE_CHECKING:
    import bm25s

FORMAT = INDEX_FORMAT

Backend = Literal["auto", "numba", "numpy"]
BACKENDS = ("auto", "numba", "numpy")


class BM25Index(StoreBacked):
    """A BM25 index directory opened for search; build one with ``BM25Index.build``."""

    def __init__(
        self,
        path: Path,
        manifest: dict[str, Any],
        retriever: bm25s.BM25,
        store: PassageStore,
        n_threads: int = 0,
    ):
        self.path = path
        self._manifest = manifest
        self._bm25 = retriever
        self.store = store
        self._n = int(manifest["passage_count"])
        self.n_threads = n_threads
        self._tokenizer = BM25Tokenizer(retriever.vocab_dict, grow=False)

    # Index a stream of passages into a directory (atomically); returns the manifest written.
    build = staticmethod(build_bm25_index)

    @classmethod
    def load(
        cls,
        index_dir: str | Path,
        mmap: bool = True,
        *,
        backend: Backend = "auto",
        n_threads: int = 0,
    ) -> BM25Index:
        """Open an index directory. ``backend="auto"`` uses numba when it is importable.

        ``mmap=True`` maps the score matrix instead of reading it, so opening is fast and
        memory stays flat in corpus size. With numba the first search compiles (a few seconds).
        """
        path = Path(index_dir)
        if not path.is_dir():
            raise index_error(path, "no such index directory")
        manifest = read_manifest(path)
        count = manifest["passage_count"]
        if backend not in BACKENDS:
            raise DynragError(f"unknown BM25 backend {backend!r}; use auto, numba or numpy")
        _check_bm25s_params(path)
        import bm25s  # here, not at the top: it imports numba when installed, a second for nothing
        # in a command that fails before it opens an index

        store = PassageStore.open(path, count, mmap=mmap)
        try:
            try:
                retriever = bm25s.BM25.load(path, mmap=mmap, load_corpus=False, show_progress=False, backend=backend)
            except ImportError as e:
                raise DynragError(f"BM25 backend {backend!r} is not available: {e}") from e
            except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
                raise index_error(path, f"bm25s files unreadable ({type(e).__name__}: {e})") from e
            if retriever.scores.get("num_docs") != count:
                raise index_error(
                    path, f"score matrix has {retriever.scores.get('num_docs')} passages, manifest says {count}"
                )
        except BaseException:
            store.close()
            raise
        return cls(path, manifest, retriever, store, n_threads=n_threads)

    # ---- searching ------------------------------------------------------------------------

    def search_rows_batch(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Passage rows and scores of the top k per query, best first: two (len(queries), k)
        arrays, without reading any passage. A slot whose passage shares no term with the query
        has row -1 and score 0. ``store.hit_lists(rows, scores)`` makes hits of them;
        ``search_batch`` does both."""
        k = min(k, self._n)
        rows = np.full((len(queries), max(k, 0)), -1, dtype=np.int64)
        scores = np.zeros((len(queries), max(k, 0)), dtype=np.float32)
        if k <= 0 or not queries:
            return rows, scores
        token_ids = self._tokenizer.query_ids(queries)
        active = [i for i, ids in enumerate(token_ids) if ids]
        if not active:
            return rows, scores
        if len(active) < len(token_ids):
            token_ids = [token_ids[i] for i in active]
        # One retrieve call for the whole batch: bm25s's per-call overhead dominates otherwise.
        docs, found = self._bm25.retrieve(
            token_ids, k=k, show_progress=False, n_threads=self.n_threads, return_as="tuple"
        )
        docs, found = np.asarray(docs).reshape(len(active), k), np.asarray(found).reshape(len(active), k)
        if len(active) == len(queries):
            rows[:], scores[:] = docs, found
        else:
            rows[active], scores[active] = docs, found
        rows[scores <= 0.0] = -1
        return rows, scores

    def search_batch(self, queries: list[str], k: int) -> list[list[Hit]]:
        """Top-k hits per query, best first. Passages sharing no term with a query are not
        returned, so a query of only stopwords/unknown words gets [] and k above the corpus
        size is clamped."""
        if not queries:
            return []
        return self.store.hit_lists(*self.search_rows_batch(queries, k))

    # ---- misc (len, manifest, passage, close: StoreBacked) ------------------------------

    @property
    def backend(self) -> str:
        return str(self._bm25.backend)

    def verify(self) -> None:
        """Re-hash passages.jsonl against the manifest (reads the whole file; load() does not)."""
        self.store.verify(self._manifest["corpus_sha256"])


def _check_bm25s_params(path: Path) -> None:
    """bm25s's params.index.json must be a JSON object (bm25s itself fails on anything else with
    an AttributeError deep inside). Small: read twice at no cost."""
    import json

    for name in ("params.index.json",):
        try:
            data = json.loads((path / name).read_text(encoding="utf-8"))
        except FileNotFoundError as e:
            raise index_error(path, f"{name} missing") from e
        except OSError as e:
            raise index_error(path, f"{name} unreadable ({e})") from e
        except ValueError as e:  # not JSON, or not UTF-8
            raise index_error(path, str(json_error(name, e))) from e
        if not isinstance(data, dict):
            raise index_error(path, f"{name} holds a JSON {type(data).__name__}, expected an object")
