"""Building a BM25 index directory: a streaming pass that writes the passage store and the score
matrix, in constant memory in corpus size, swapped into place atomically.

Title and text of a passage are indexed together. Scores are bm25s's "lucene" BM25 (k1=1.5,
b=0.75). The score matrix is computed here, vectorised per batch, with the same arithmetic as
bm25s.BM25.index: bm25s's per-document Python loop would cap ingest speed, and it needs every
document's tokens in memory at once. Files written (besides the passage store, see store.py):

  manifest.json              format, version, passage count, corpus checksum, tokenizer settings
  *.index.npy, *.index.json  bm25s's own files (CSC score matrix, vocabulary, parameters)
  parents.jsonl              the large chunks, for an index chunked small-to-big
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

import dynrag
from dynrag.corpus.passage import Passage
from dynrag.io.directories import atomic_directory
from dynrag.io.files import atomic_write_json
from dynrag.io.jsonl import json_line
from dynrag.progress import stderr_bar
from dynrag.retrieval.manifest import INDEX_FORMAT, INDEX_FORMAT_VERSION
from dynrag.retrieval.store import PARENTS
from dynrag.retrieval.store_writer import PassageWriter, check_replaceable
from dynrag.retrieval.tokenizer import TOKENIZER_SETTINGS, BM25Tokenizer
from dynrag.text.chunking import ChunkSpec, chunk_passages, small_chunks_keeping_large

K1, B, METHOD = 1.5, 0.75, "lucene"

# A passage longer than this (about 2,500 tokens, a third of the bundled model's window) cannot
# sit in a prompt beside others whole; `dynrag index` warns and suggests --chunk.
LONG_PASSAGE_CHARS = 10_000

# A batch is tokenised and written in one go. Its size bounds the build's working memory (the
# corpus size does not), while still amortising the per-call numpy overhead.
_BATCH_PASSAGES = 1024
_BATCH_CHARS = 1 << 20
# The score matrix is assembled a block of consecutive terms at a time: about this many postings
# (~40 bytes each while a block is sorted and scored), or one term's if that term has more.
_BLOCK_POSTINGS = 1 << 22


def build_bm25_index(
    passages: Iterable[Passage],
    out_dir: str | Path,
    *,
    progress: bool = True,
    chunk: ChunkSpec | None = None,
    total: int | None = None,
    add_parts: Callable[[Path], Any] | None = None,
    sources: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Index a stream of passages into ``out_dir`` and return the manifest written.

    Passages are consumed one batch at a time: texts go straight to disk and token postings to
    scratch files, so memory holds one batch, the vocabulary, about 20 bytes a passage and one block
    of the score matrix while it is assembled (the matrix itself goes to disk a block at a time). Everything is written to a temporary sibling
    directory that replaces ``out_dir`` only when complete, so an error or crash mid-build leaves
    an existing index untouched. ``chunk`` splits passages on the fly; ``total`` sizes the
    progress bar when known. ``add_parts(tmp)`` writes more parts (the dense part) into the
    finished BM25 index in its temporary directory, so all of them replace ``out_dir`` in one swap.
    ``sources`` (corpus.source_stamps) goes into the manifest, so a later change of the corpus
    can be told (manifest.corpus_changes).
    """
    with atomic_directory(out_dir, check=check_replaceable) as tmp:
        manifest = write_bm25_index(passages, tmp, progress=progress, chunk=chunk, total=total, sources=sources)
        if add_parts is not None:
            add_parts(tmp)
        return manifest


def write_bm25_index(
    passages: Iterable[Passage],
    directory: Path,
    *,
    progress: bool = True,
    chunk: ChunkSpec | None = None,
    total: int | None = None,
    sources: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write a BM25 index into the empty ``directory`` (not atomically: the temporary directory
    of ``build_bm25_index``); returns its manifest."""
    if chunk is not None and chunk.kind == "small-to-big":
        manifest = _write_small_to_big(passages, chunk, directory, progress, total)
    else:
        manifest = _write_index(chunk_passages(passages, chunk), directory, progress, total, chunk)
    if sources is not None:
        manifest["sources"] = sources
        atomic_write_json(directory / "manifest.json", manifest)
    return manifest


def _write_small_to_big(
    passages: Iterable[Passage], chunk: ChunkSpec, tmp: Path, progress: bool, total: int | None
) -> dict[str, Any]:
    """Index the small chunks; write their large chunks to parents.jsonl in the same directory."""
    with open(tmp / PARENTS, "w", encoding="utf-8") as parents:

        def keep(large: Passage) -> None:
            parents.write(json_line({"id": large.id, "title": large.title, "text": large.text}))

        return _write_index(small_chunks_keeping_large(passages, chunk, keep), tmp, progress, total, chunk)


def _write_index(
    passages: Iterable[Passage], tmp: Path, progress: bool, total: int | None, chunk: ChunkSpec | None
) -> dict[str, Any]:
    tokenizer = BM25Tokenizer(None, grow=True)
    runs = PostingRuns(tmp / ".postings")
    store = PassageWriter(tmp)
    long = {"count": 0, "over_chars": LONG_PASSAGE_CHARS, "longest_id": None, "longest_chars": 0}
    try:
        with stderr_bar(total, "Indexing", progress) as bar:

            def flush(batch: list[Passage]) -> None:
                for p in batch:
                    if len(p.text) > LONG_PASSAGE_CHARS:
                        long["count"] += 1
                        if len(p.text) > long["longest_chars"]:
                            long["longest_id"], long["longest_chars"] = p.id, len(p.text)
                store.add(batch)
                flat, lengths = tokenizer.corpus_batch([f"{p.title}\n{p.text}" for p in batch])
                runs.add(flat, lengths, len(tokenizer.stem_to_id))
                bar.update(len(batch))

            batch: list[Passage] = []
            chars = 0
            for p in passages:
                batch.append(p)
                chars += len(p.text)
                if len(batch) == _BATCH_PASSAGES or chars >= _BATCH_CHARS:
                    flush(batch)
                    batch, chars = [], 0
            if batch:
                flush(batch)
        store.finish()

        runs.write_score_matrix(tmp, len(tokenizer.stem_to_id))
        write_bm25s_files(tmp, tokenizer.stem_to_id, store.count)
    finally:
        store.close()
        runs.close()

    import bm25s  # here, not at the top: it imports numba (see retrieval/bm25.py)

    manifest = {
        "format": INDEX_FORMAT,
        "format_version": INDEX_FORMAT_VERSION,
        "passage_count": store.count,
        "corpus_sha256": store.sha256,
        "tokenizer": dict(TOKENIZER_SETTINGS),
        "fields": ["title", "text"],
        "bm25": {"method": METHOD, "k1": K1, "b": B},
        "chunk": str(chunk) if chunk is not None else "none",
        "long_passages": long,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "dynrag_version": dynrag.__version__,
        "bm25s_version": bm25s.__version__,
    }
    atomic_write_json(tmp / "manifest.json", manifest)
    return manifest


def write_bm25s_files(directory: Path, vocab: dict[str, int], num_docs: int) -> None:
    """bm25s's vocab.index.json and params.index.json, as ``bm25s.BM25.save`` writes them (the
    score matrix files come from ``PostingRuns.write_score_matrix``)."""
    import json

    import bm25s

    model = bm25s.BM25(k1=K1, b=B, method=METHOD, backend="numpy")
    with open(directory / "vocab.index.json", "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    params = dict(k1=model.k1, b=model.b, delta=model.delta, method=model.method, idf_method=model.idf_method,
                  dtype=model.dtype, int_dtype=model.int_dtype, num_docs=num_docs, version=bm25s.__version__,
                  backend=model.backend)
    with open(directory / "params.index.json", "w") as f:
        json.dump(params, f, indent=4)


class PostingRuns:
    """The (term, document, tf) postings of each batch, spilled to disk until the end.

    bm25s needs the score matrix column by column (term-major), but idf and the average length
    are only known once every passage is in. Each batch is therefore reduced to its sorted
    postings and written out (12 bytes a posting, on disk). At the end the matrix is assembled a
    block of consecutive terms at a time (about ``_BLOCK_POSTINGS`` postings, cut at any term: term
    ids follow first appearance, so the first thousand ids are the commonest words and hold ~40% of
    all postings); where a block starts in each run is a binary search in that run's sorted terms.
    Each run's slice for the block is read back, sorted into columns and appended to the .npy files
    on disk. Memory holds one batch, one block, the vocabulary-sized counts and 4 bytes a passage,
    never the corpus's tokens nor the matrix.
    """

    _NAMES = ("terms", "docs", "tfs")

    def __init__(self, directory: Path):
        directory.mkdir()
        self._dir = directory
        self._files = [open(directory / name, "w+b") for name in self._NAMES]
        self._runs: list[tuple[int, int]] = []  # (first posting, postings)
        self._lengths: list[np.ndarray] = []
        self._df = np.zeros(1 << 16, dtype=np.int64)
        self._postings = 0
        self.n_docs = 0
        self.n_tokens = 0

    def add(self, flat: np.ndarray, lengths: np.ndarray, n_vocab: int) -> None:
        n = len(lengths)
        local = np.repeat(np.arange(n, dtype=np.int64), lengths)
        keys = flat.astype(np.int64) * n + local  # term-major, then document
        del local
        keys.sort()
        first = np.empty(len(keys), dtype=bool)
        first[0] = True
        np.not_equal(keys[1:], keys[:-1], out=first[1:])
        starts = np.flatnonzero(first)
        tf = np.diff(starts, append=len(keys)).astype(np.int32)
        pairs = keys[starts]
        terms = (pairs // n).astype(np.int32)
        docs = (pairs - terms.astype(np.int64) * n + self.n_docs).astype(np.int32)
        for f, array in zip(self._files, (terms, docs, tf)):
            array.tofile(f)
        self._runs.append((self._postings, len(pairs)))
        self._postings += len(pairs)
        if n_vocab > len(self._df):  # grow by doubling: the vocabulary keeps growing
            self._df = np.concatenate([self._df, np.zeros(max(n_vocab, len(self._df)), np.int64)])
        self._df[:n_vocab] += np.bincount(terms, minlength=n_vocab)
        self._lengths.append(lengths.astype(np.int32))
        self.n_docs += n
        self.n_tokens += int(lengths.sum())

    def write_score_matrix(self, out: Path, n_vocab: int) -> None:
        """bm25s's CSC score matrix for method="lucene", written to ``out`` as bm25s's
        data/indices/indptr .npy files.

        Same arithmetic and dtypes as bm25s.BM25.index: idf in float32, the term-frequency part
        in float64, their product rounded to float32; each column (term) lists its documents in
        ascending order, since runs are read back in document order.
        """
        n_docs, df = self.n_docs, self._df[:n_vocab]
        lengths = np.concatenate(self._lengths)
        self._lengths.clear()
        avg_len = self.n_tokens / n_docs  # == np.mean of the lengths, as bm25s computes it
        idf = np.zeros(n_vocab, dtype=np.float32)
        seen = df > 0
        idf[seen] = np.log(1 + (n_docs - df[seen] + 0.5) / (df[seen] + 0.5))
        indptr = np.zeros(n_vocab + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        nnz = int(indptr[-1])
        np.save(out / "indptr.csc.index.npy", indptr, allow_pickle=False)
        for f in self._files:
            f.flush()
        bounds = _blocks(indptr, _BLOCK_POSTINGS)
        # where each block starts in each run: one binary search per run over its sorted terms
        terms_file = np.memmap(self._dir / "terms", dtype=np.int32, mode="r") if self._postings else np.zeros(0, np.int32)
        starts = np.array([first + np.searchsorted(terms_file[first : first + size], bounds)
                           for first, size in self._runs], dtype=np.int64).reshape(len(self._runs), len(bounds))
        del terms_file
        with open(out / "data.csc.index.npy", "wb") as data_out, open(out / "indices.csc.index.npy", "wb") as index_out:
            np.lib.format.write_array_header_1_0(data_out, {"descr": "<f4", "fortran_order": False, "shape": (nnz,)})
            np.lib.format.write_array_header_1_0(index_out, {"descr": "<i4", "fortran_order": False, "shape": (nnz,)})
            written = 0
            for b in range(len(bounds) - 1):
                terms, docs, tf = self._read_block(starts[:, b], starts[:, b + 1])
                written += len(terms)
                order = np.argsort(terms, kind="stable")  # by term; within a term, runs keep document order
                terms, docs, tf = terms[order], docs[order], tf[order]
                del order
                tf64 = tf.astype(np.float64)
                tfc = tf64 / (K1 * ((1 - B) + B * lengths[docs] / avg_len) + tf64)
                (idf[terms] * tfc).astype(np.float32).tofile(data_out)
                docs.tofile(index_out)
            if written != nnz:  # pragma: no cover - the blocks must cover every posting once
                raise RuntimeError(f"score matrix has {written} postings, the counts say {nnz}")
        self.close()  # the scratch files are not part of the index

    def _read_block(self, los: np.ndarray, his: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The postings at [lo, hi) of every run (absolute positions), in run (document) order."""
        parts: list[list[np.ndarray]] = [[], [], []]
        for lo, hi in zip(los.tolist(), his.tolist()):
            if hi <= lo:
                continue
            for part, f in zip(parts, self._files):
                f.seek(4 * lo)
                part.append(np.fromfile(f, dtype=np.int32, count=hi - lo))
        if not parts[0]:
            return (np.zeros(0, np.int32),) * 3
        return tuple(np.concatenate(part) for part in parts)  # type: ignore[return-value]

    def close(self) -> None:
        for f in self._files:
            f.close()
        shutil.rmtree(self._dir, ignore_errors=True)  # idempotent: close() may run twice


def _blocks(indptr: np.ndarray, postings: int) -> np.ndarray:
    """Term ids 0 = b_0 < b_1 < ... < b_m = n_vocab cutting the terms into blocks [b_i, b_i+1) of at
    most ``postings`` postings each, or of one term where that term alone has more (``indptr``: the
    CSC column starts, one per term, then the total)."""
    n_vocab, bounds = len(indptr) - 1, [0]
    while bounds[-1] < n_vocab:
        start = bounds[-1]
        # the last term whose block-relative end stays within the budget, at least one term
        end = int(np.searchsorted(indptr, indptr[start] + postings, side="right")) - 1
        bounds.append(min(max(end, start + 1), n_vocab))
    return np.array(bounds, dtype=np.int64)
