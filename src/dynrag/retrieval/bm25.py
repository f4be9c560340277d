"""BM25 retrieval over bm25s: a streaming build, a crash-safe index directory, fast batch search.

Index directory (no pickle anywhere):
  manifest.json            format, version, passage count, corpus checksum, tokenizer settings
  passages.jsonl           the passages as indexed, one {"id","title","text"} object per line
  offsets.npy              int64 byte offset of every line of passages.jsonl, plus the file end
  fields.npy               uint32 character offsets of the title and text literals in each line
  *.index.npy, *.index.json  bm25s's own files (CSC score matrix, vocabulary, parameters)

Tokens are exactly those of ``bm25s.tokenization.Tokenizer(lower=True, stopwords="en",
stemmer=PyStemmer english)``: lower-case, regex ``\\b\\w\\w+\\b``, bm25s's English stopwords,
Snowball English stems. The title and text of a passage are indexed together. Scores are bm25s's
"lucene" BM25 (k1=1.5, b=0.75). The score matrix is computed here, vectorised per batch, with
the same arithmetic as bm25s.BM25.index: bm25s's per-document Python loop would cap ingest
speed, and it needs every document's tokens in memory at once.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import re
import shutil
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from json.decoder import scanstring  # type: ignore[attr-defined]
from json.encoder import (  # type: ignore[attr-defined]
    encode_basestring,
    encode_basestring_ascii,
)
from pathlib import Path
from typing import Any, Literal

import bm25s
import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

import dynrag
from dynrag.corpus.passage import Passage
from dynrag.errors import DynragError, IndexError_
from dynrag.io import atomic_directory, atomic_write_json, json_line
from dynrag.retrieval.base import Hit
from dynrag.text.chunking import ChunkSpec, chunk_passages, small_chunks_keeping_large

FORMAT = "dynrag-bm25"
FORMAT_VERSION = 1
K1, B, METHOD = 1.5, 0.75, "lucene"
TOKENIZER_SETTINGS = {"stemmer": "english", "stopwords": "en", "lowercase": True}

Backend = Literal["auto", "numba", "numpy"]

# A batch is tokenised and written in one go. Its size bounds the build's working memory (the
# corpus size does not), while still amortising the per-call numpy overhead.
_BATCH_PASSAGES = 1024
_BATCH_CHARS = 1 << 20
_QUERY_CACHE_LIMIT = 1_000_000  # words remembered at query time before the cache is reset
_SPLIT = re.compile(r"(?u)\b\w\w+\b").findall  # bm25s's default splitter
# For ASCII text the same words come out of translate+split (every non-\w ASCII character
# becomes a space) at a fraction of the regex's cost; one-letter words are dropped by the
# cache lookup instead (they map to -1). Non-ASCII text keeps the regex.
_NON_WORD_ASCII = str.maketrans({c: " " for c in range(128) if not (chr(c).isalnum() or c == 95)})
# Line layout written by _encode_line; search slices the string literals out by these lengths.
_ID_PREFIX, _TITLE_SEP, _TEXT_SEP, _LINE_END = '{"id": ', ', "title": ', ', "text": ', "}\n"


class _Tokenizer:
    """Text to stem ids, matching bm25s's Tokenizer token for token but a batch at a time.

    Each distinct word is stopword-tested and stemmed once and cached as its id: -1 for a
    stopword, a one-letter word or (at query time) a stem the index has never seen.
    """

    def __init__(self, stem_to_id: dict[str, int] | None, *, grow: bool):
        # id 0 is bm25s's empty token "": the single token of a passage with no words.
        self.stem_to_id: dict[str, int] = stem_to_id if stem_to_id is not None else {"": 0}
        self._grow = grow
        self._word_to_id: dict[str, int] = {}
        self._stopwords = frozenset(STOPWORDS_EN)
        # PyStemmer's own cache (default 10k words) thrashes on a corpus and triples stemming
        # time; the word cache here already makes every word stemmed once.
        self._stem_words = Stemmer.Stemmer("english", 0).stemWords

    @staticmethod
    def split(text: str) -> list[str]:
        text = text.lower()
        if text.isascii():
            return text.translate(_NON_WORD_ASCII).split()
        return _SPLIT(text)

    def _learn(self, words: Iterable[str]) -> None:
        # First-occurrence order gives stems the same ids bm25s's Tokenizer gives them, so a
        # build is reproducible and its files comparable with bm25s's own.
        cache = self._word_to_id
        if not self._grow and len(cache) > _QUERY_CACHE_LIMIT:
            cache.clear()  # bound the memory of a long-running search process
        new = [w for w in dict.fromkeys(words) if w not in cache]
        if not new:
            return
        stem_to_id, stop = self.stem_to_id, self._stopwords
        for word, stem in zip(new, self._stem_words(new)):
            if len(word) < 2 or word in stop:
                cache[word] = -1
                continue
            sid = stem_to_id.get(stem)
            if sid is None:
                if self._grow:
                    sid = stem_to_id[stem] = len(stem_to_id)
                else:
                    sid = -1
            cache[word] = sid

    def corpus_batch(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Token ids of many texts as one flat int32 array plus each text's token count."""
        words: list[str] = []
        counts = np.empty(len(texts), dtype=np.int64)
        split = self.split
        for i, text in enumerate(texts):
            w = split(text)
            counts[i] = len(w)
            words.extend(w)
        self._learn(words)
        ids = np.array(list(map(self._word_to_id.__getitem__, words)), dtype=np.int32)
        keep = ids >= 0
        kept = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(keep, out=kept[1:])
        bounds = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(counts, out=bounds[1:])
        starts = kept[bounds[:-1]]
        lengths = kept[bounds[1:]] - starts
        flat = ids[keep]
        empty = lengths == 0
        if empty.any():  # as bm25s does: a text with no tokens gets the empty token, length 1
            flat = np.insert(flat, starts[empty], 0)
            lengths[empty] = 1
        return flat, lengths

    def query_ids(self, queries: Sequence[str]) -> list[list[int]]:
        """Token ids per query, words unknown to the index dropped (possibly leaving [])."""
        split = [self.split(q) for q in queries]
        cache = self._word_to_id
        for words in split:
            if not cache.keys() >= set(words):
                self._learn(w for ws in split for w in ws)
                break
        get = cache.__getitem__
        return [[i for i in map(get, ws) if i >= 0] for ws in split]


class BM25Index:
    """A BM25 index directory opened for search; build one with ``BM25Index.build``."""

    def __init__(
        self,
        path: Path,
        manifest: dict[str, Any],
        retriever: bm25s.BM25,
        offsets: np.ndarray,
        fields: np.ndarray,
        n_threads: int = 0,
    ):
        self.path = path
        self._manifest = manifest
        self._bm25 = retriever
        self._offsets = offsets
        self._fields = fields
        self._n = int(manifest["passage_count"])
        self.n_threads = n_threads
        self._tokenizer = _Tokenizer(retriever.vocab_dict, grow=False)
        self._file = open(path / "passages.jsonl", "rb")
        self._mm = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)

    # ---- building -------------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        passages: Iterable[Passage],
        out_dir: str | Path,
        *,
        progress: bool = True,
        chunk: ChunkSpec | None = None,
        total: int | None = None,
    ) -> dict[str, Any]:
        """Index a stream of passages into ``out_dir`` and return the manifest written.

        Passages are consumed one batch at a time: texts go straight to disk and token
        postings to scratch files, so memory holds one batch, the vocabulary, 20 bytes a
        passage and, at the end, the score matrix itself (8 bytes a posting). Everything is
        written to a temporary sibling directory that replaces ``out_dir`` only when complete,
        so an error or crash mid-build leaves an existing index untouched. ``chunk`` splits
        passages on the fly; ``total`` sizes the progress bar when known.
        """
        with atomic_directory(out_dir, check=check_replaceable) as tmp:
            if chunk is not None and chunk.kind == "small-to-big":
                return _write_small_to_big(passages, chunk, tmp, progress, total)
            return _write_index(chunk_passages(passages, chunk), tmp, progress, total, chunk)

    # ---- loading --------------------------------------------------------------------------

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
            raise _index_error(path, "no such index directory")
        manifest = _read_manifest(path)
        count = manifest["passage_count"]
        if backend not in ("auto", "numba", "numpy"):
            raise DynragError(f"unknown BM25 backend {backend!r}; use auto, numba or numpy")
        try:
            offsets = np.load(path / "offsets.npy", mmap_mode="r" if mmap else None)
            fields = np.load(path / "fields.npy", mmap_mode="r" if mmap else None)
        except (OSError, ValueError) as e:
            raise _index_error(path, f"passage offsets unreadable ({e})") from e
        if offsets.shape != (count + 1,) or fields.shape != (count, 2):
            raise _index_error(
                path, f"offsets cover {len(offsets) - 1} passages, manifest says {count}"
            )
        try:
            size = (path / "passages.jsonl").stat().st_size
        except OSError as e:
            raise _index_error(path, "passages.jsonl missing") from e
        if size != int(offsets[-1]):
            raise _index_error(path, f"passages.jsonl has {size} bytes, expected {offsets[-1]}")
        try:
            retriever = bm25s.BM25.load(
                path, mmap=mmap, load_corpus=False, show_progress=False, backend=backend
            )
        except ImportError as e:
            raise DynragError(f"BM25 backend {backend!r} is not available: {e}") from e
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise _index_error(path, f"bm25s files unreadable ({type(e).__name__}: {e})") from e
        if retriever.scores.get("num_docs") != count:
            raise _index_error(
                path,
                f"score matrix has {retriever.scores.get('num_docs')} passages, "
                f"manifest says {count}",
            )
        return cls(path, manifest, retriever, offsets, fields, n_threads=n_threads)

    # ---- searching ------------------------------------------------------------------------

    def search(self, query: str, k: int) -> list[Hit]:
        return self.search_batch([query], k)[0]

    def search_rows_batch(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Passage rows and scores of the top k per query, best first: two (len(queries), k)
        arrays, without reading any passage. A slot whose passage shares no term with the query
        has row -1 and score 0. Use ``passage(row)`` for the text; ``search_batch`` does both."""
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
        results: list[list[Hit]] = [[] for _ in queries]
        row_matrix, score_matrix = self.search_rows_batch(queries, k)
        if row_matrix.size == 0:
            return results
        k = row_matrix.shape[1]
        active = [i for i in range(len(queries)) if row_matrix[i, 0] >= 0]
        if not active:
            return results
        rows = row_matrix[active].reshape(-1)
        scores = score_matrix[active]
        rows = np.where(rows < 0, 0, rows)  # unmatched slots are skipped below by their score
        line_starts = self._offsets[rows].tolist()
        line_ends = self._offsets[rows + 1].tolist()
        title_at, text_at = np.asarray(self._fields[rows], dtype=np.int64).T.tolist()
        flat_scores = np.asarray(scores).reshape(-1).tolist()
        # Materialising hits is most of the cost above raw bm25s, hence the inlined slicing:
        # a line without backslashes holds its strings verbatim between the quotes, so only
        # lines with escapes pay for a JSON string scan.
        mm, new_hit, scan = self._mm, _new_hit, scanstring
        id_at = len(_ID_PREFIX) + 1
        title_gap, text_gap, end_gap = len(_TITLE_SEP) + 1, len(_TEXT_SEP) + 1, len(_LINE_END) + 1
        pos = 0
        for qi in active:
            hits = results[qi]
            for j in range(pos, pos + k):
                score = flat_scores[j]
                if score <= 0.0:
                    break  # sorted: the rest share no term with the query either
                line = mm[line_starts[j] : line_ends[j]].decode("utf-8")
                a, b = title_at[j], text_at[j]
                if line.find("\\", id_at) < 0:
                    hit = new_hit(line[id_at : a - title_gap], line[a + 1 : b - text_gap],
                                  line[b + 1 : -end_gap], score)
                else:
                    hit = new_hit(scan(line, id_at)[0], scan(line, a + 1)[0],
                                  scan(line, b + 1)[0], score)
                hits.append(hit)
            pos += k
        return results

    # ---- misc -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._n

    @property
    def manifest(self) -> dict[str, Any]:
        return dict(self._manifest)

    @property
    def backend(self) -> str:
        return str(self._bm25.backend)

    def passage(self, row: int) -> Passage:
        """The passage stored at ``row`` (0-based, in build order)."""
        if not 0 <= row < self._n:
            raise IndexError(row)
        line = self._mm[int(self._offsets[row]) : int(self._offsets[row + 1])]
        return Passage(**json.loads(line))

    def verify(self) -> None:
        """Re-hash passages.jsonl against the manifest (reads the whole file; load() does not)."""
        digest = hashlib.sha256()
        with open(self.path / "passages.jsonl", "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        if digest.hexdigest() != self._manifest["corpus_sha256"]:
            raise _index_error(self.path, "passages.jsonl does not match its manifest checksum")

    def close(self) -> None:
        self._mm.close()
        self._file.close()

    def __enter__(self) -> BM25Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---- helpers ------------------------------------------------------------------------------


def _fast_hit_factory() -> Any:
    # Hit is a frozen dataclass, whose __init__ goes through object.__setattr__ per field;
    # filling its slots directly is about twice as fast, which shows at 10+ hits per query.
    slots = getattr(Hit, "__slots__", ())
    if tuple(slots) != ("id", "title", "text", "score"):
        return Hit  # Hit changed shape: stay correct, just slower
    new = Hit.__new__
    set_id, set_title = Hit.id.__set__, Hit.title.__set__  # type: ignore[attr-defined]
    set_text, set_score = Hit.text.__set__, Hit.score.__set__  # type: ignore[attr-defined]

    def make(pid: str, title: str, text: str, score: float) -> Hit:
        hit = new(Hit)
        set_id(hit, pid)
        set_title(hit, title)
        set_text(hit, text)
        set_score(hit, score)
        return hit

    return make


_new_hit = _fast_hit_factory()


def _layout(pid: str, title: str, text: str) -> tuple[str, int, int]:
    title_at = len(_ID_PREFIX) + len(pid) + len(_TITLE_SEP)
    text_at = title_at + len(title) + len(_TEXT_SEP)
    line = "".join((_ID_PREFIX, pid, _TITLE_SEP, title, _TEXT_SEP, text, _LINE_END))
    return line, title_at, text_at


def _encode_line(p: Passage) -> tuple[bytes, int, int]:
    """One passages.jsonl line and the character offsets of its title and text literals."""
    line, title_at, text_at = _layout(
        encode_basestring(p.id), encode_basestring(p.title), encode_basestring(p.text)
    )
    try:
        return line.encode("utf-8"), title_at, text_at
    except UnicodeEncodeError:
        # A lone surrogate (from a "\ud800" escape in the source JSON) has no UTF-8 form;
        # \u-escaping the whole line, as json.dumps does by default, still round-trips.
        line, title_at, text_at = _layout(
            encode_basestring_ascii(p.id),
            encode_basestring_ascii(p.title),
            encode_basestring_ascii(p.text),
        )
        return line.encode("ascii"), title_at, text_at


def _write_index(
    passages: Iterable[Passage],
    tmp: Path,
    progress: bool,
    total: int | None,
    chunk: ChunkSpec | None,
) -> dict[str, Any]:
    tokenizer = _Tokenizer(None, grow=True)
    runs = _PostingRuns(tmp / ".postings")
    try:
        return _write_passages_and_matrix(passages, tmp, progress, total, chunk, tokenizer, runs)
    finally:
        runs.close()


def _write_passages_and_matrix(
    passages: Iterable[Passage],
    tmp: Path,
    progress: bool,
    total: int | None,
    chunk: ChunkSpec | None,
    tokenizer: _Tokenizer,
    runs: _PostingRuns,
) -> dict[str, Any]:
    from tqdm import tqdm

    digest = hashlib.sha256()
    offset_chunks: list[np.ndarray] = []
    field_chunks: list[np.ndarray] = []
    position = 0
    bar = tqdm(
        total=total, desc="Indexing", unit=" passages", disable=not progress,
        file=sys.stderr, mininterval=0.5, dynamic_ncols=True,
    )
    with open(tmp / "passages.jsonl", "wb") as out, bar:

        def flush(batch: list[Passage]) -> None:
            nonlocal position
            encoded = [_encode_line(p) for p in batch]
            lines = [e[0] for e in encoded]
            blob = b"".join(lines)
            out.write(blob)
            digest.update(blob)
            sizes = np.fromiter(map(len, lines), np.int64, len(lines))
            offsets = np.empty(len(lines), dtype=np.int64)
            offsets[0] = position
            np.cumsum(sizes[:-1], out=offsets[1:])
            offsets[1:] += position
            position += len(blob)
            offset_chunks.append(offsets)
            field_chunks.append(np.array([e[1:] for e in encoded], dtype=np.uint32))
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
    if not offset_chunks:
        raise DynragError("nothing to index: the corpus yielded no passages")

    offsets = np.concatenate(offset_chunks + [np.array([position], dtype=np.int64)])
    np.save(tmp / "offsets.npy", offsets, allow_pickle=False)
    np.save(tmp / "fields.npy", np.concatenate(field_chunks), allow_pickle=False)
    count = len(offsets) - 1
    del offset_chunks, field_chunks, offsets

    retriever = bm25s.BM25(k1=K1, b=B, method=METHOD, backend="numpy")
    retriever.scores = runs.score_matrix(len(tokenizer.stem_to_id))
    retriever.vocab_dict = tokenizer.stem_to_id
    retriever.nonoccurrence_array = None
    retriever.save(tmp, show_progress=False)
    del retriever

    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "passage_count": count,
        "corpus_sha256": digest.hexdigest(),
        "tokenizer": dict(TOKENIZER_SETTINGS),
        "fields": ["title", "text"],
        "bm25": {"method": METHOD, "k1": K1, "b": B},
        "chunk": str(chunk) if chunk is not None else "none",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "dynrag_version": dynrag.__version__,
        "bm25s_version": bm25s.__version__,
    }
    atomic_write_json(tmp / "manifest.json", manifest)
    return manifest


class _PostingRuns:
    """The (term, document, tf) postings of each batch, spilled to disk until the end.

    bm25s needs the score matrix column by column (term-major), but idf and the average length
    are only known once every passage is in. Each batch is therefore reduced to its sorted
    postings and written out (12 bytes a posting, on disk), and the matrix is assembled at the
    end straight into its final arrays (8 bytes a posting). Memory holds one batch, the
    vocabulary-sized counts and 4 bytes a passage, never the corpus's tokens.
    """

    _NAMES = ("terms", "docs", "tfs")

    def __init__(self, directory: Path):
        directory.mkdir()
        self._dir = directory
        self._files = [open(directory / name, "w+b") for name in self._NAMES]
        self._run_sizes: list[int] = []
        self._lengths: list[np.ndarray] = []
        self._df = np.zeros(1 << 16, dtype=np.int64)
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
        self._run_sizes.append(len(pairs))
        if n_vocab > len(self._df):  # grow by doubling: the vocabulary keeps growing
            self._df = np.concatenate([self._df, np.zeros(max(n_vocab, len(self._df)), np.int64)])
        self._df[:n_vocab] += np.bincount(terms, minlength=n_vocab)
        self._lengths.append(lengths.astype(np.int32))
        self.n_docs += n
        self.n_tokens += int(lengths.sum())

    def score_matrix(self, n_vocab: int) -> dict[str, Any]:
        """bm25s's CSC score matrix (data, indices, indptr) for method="lucene".

        Same arithmetic and dtypes as bm25s.BM25.index: idf in float32, the term-frequency
        part in float64, their product rounded to float32; each column (term) lists its
        documents in ascending order, since runs are replayed in document order.
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
        heads = indptr[:-1].copy()  # next free slot of each column
        data = np.empty(int(indptr[-1]), dtype=np.float32)
        indices = np.empty(int(indptr[-1]), dtype=np.int32)
        for f in self._files:
            f.flush()
            f.seek(0)
        for size in self._run_sizes:
            terms, docs, tf = (
                np.fromfile(f, dtype=np.int32, count=size) for f in self._files
            )
            first = np.empty(size, dtype=bool)
            first[0] = True
            np.not_equal(terms[1:], terms[:-1], out=first[1:])
            group_starts = np.flatnonzero(first)
            group_sizes = np.diff(group_starts, append=size)
            rank = np.arange(size) - np.repeat(group_starts, group_sizes)
            slots = heads[terms] + rank
            heads[terms[group_starts]] += group_sizes
            tf64 = tf.astype(np.float64)
            tfc = tf64 / (K1 * ((1 - B) + B * lengths[docs] / avg_len) + tf64)
            data[slots] = idf[terms] * tfc
            indices[slots] = docs
        self.close()  # the scratch files are not part of the index
        return {"data": data, "indices": indices, "indptr": indptr, "num_docs": int(n_docs)}

    def close(self) -> None:
        for f in self._files:
            f.close()
        shutil.rmtree(self._dir, ignore_errors=True)  # idempotent: close() may run twice


def _index_error(path: Path, what: str) -> IndexError_:
    return IndexError_(
        f"{path}: {what}; rebuild it with `dynrag index SOURCE --out {path}`"
    )


def _write_small_to_big(
    passages: Iterable[Passage], chunk: ChunkSpec, tmp: Path, progress: bool, total: int | None
) -> dict[str, Any]:
    """Index the small chunks; write their large chunks to parents.jsonl in the same directory."""
    from dynrag.retrieval.small_to_big import PARENTS_FILE

    with open(tmp / PARENTS_FILE, "w", encoding="utf-8") as parents:

        def keep(large: Passage) -> None:
            parents.write(json_line({"id": large.id, "title": large.title, "text": large.text}))

        return _write_index(small_chunks_keeping_large(passages, chunk, keep), tmp, progress, total, chunk)


def _read_manifest(path: Path) -> dict[str, Any]:
    file = path / "manifest.json"
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise _index_error(path, "manifest.json missing (not a BM25 index?)") from e
    except (OSError, ValueError) as e:
        raise _index_error(path, f"manifest.json unreadable ({e})") from e
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise _index_error(path, f"manifest.json format is {found!r}, expected {FORMAT!r}")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise _index_error(
            path, f"index format version {version!r} is not supported (expected {FORMAT_VERSION})"
        )
    count = manifest.get("passage_count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise _index_error(path, f"manifest.json passage_count {count!r} is invalid")
    if not isinstance(manifest.get("corpus_sha256"), str):
        raise _index_error(path, "manifest.json has no corpus_sha256")
    return manifest


_INDEX_MARKERS = ("manifest.json", "passages.jsonl", "params.index.json")


def check_replaceable(out: Path) -> None:
    # Never delete a directory that is not (the remains of) an index: --out may be a typo.
    if not out.exists():
        return
    if not out.is_dir():
        raise IndexError_(f"{out}: exists and is not a directory; choose another --out")
    if any(out.iterdir()) and not any((out / m).exists() for m in _INDEX_MARKERS):
        raise IndexError_(
            f"{out}: exists and is not a dynrag BM25 index; refusing to replace it "
            "(choose another --out or empty it)"
        )
