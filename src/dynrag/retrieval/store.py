"""The passage store every local index shares: the passages of an index directory, read by row.

  passages.jsonl  one {"id", "title", "text"} object per line, in build order (the line layout is
                  fixed by ``encode_line``: id, title, text, in that order, json-escaped)
  offsets.npy     int64 byte offset of every line, plus the end of the file (count + 1 values)
  fields.npy      uint32 character offsets of the title and text literals in each line (count, 2);
                  absent from standalone dense indexes written before the store was shared
  manifest.json   written by the index kind that owns the directory (BM25, or a standalone dense
                  index); ``read_manifest`` checks the part every kind shares: format, version,
                  passage count and ``corpus_sha256`` (the sha256 of passages.jsonl)

BM25 and dense indexes write their passages with ``PassageWriter`` and read them with
``PassageStore``, so the same corpus gives byte-identical passages.jsonl (and the same checksum)
in every kind of index, and a dense part next to a BM25 index reuses the BM25 index's passages.
``PassageStore.hit_lists`` turns a (queries, k) matrix of rows into hits in bulk: materialising
hits is most of a search's cost above the raw score matrix, so it slices the string literals out
of each memory-mapped line instead of decoding JSON.
"""

from __future__ import annotations

import hashlib
import json
import mmap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dynrag.corpus.passage import Passage
from dynrag.retrieval.base import BatchSearch, Hit
from dynrag.retrieval.manifest import index_error
from dynrag.retrieval.passage_lines import PassageLines
from dynrag.retrieval.stored_hits import new_hit, stored_hit_class, stored_hits

PASSAGES, OFFSETS, FIELDS = "passages.jsonl", "offsets.npy", "fields.npy"
PARENTS = "parents.jsonl"  # the large chunks of an index chunked small-to-big


class PassageStore:
    """The passages of one directory, memory-mapped; open with ``PassageStore.open``."""

    def __init__(self, path: Path, offsets: np.ndarray, fields: np.ndarray | None):
        self.path = path
        self._offsets = offsets
        self._fields = fields
        self._n = len(offsets) - 1
        self._file = open(path / PASSAGES, "rb")
        self._mm: mmap.mmap | None = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        self._hit_class = stored_hit_class(PassageLines(self._mm, offsets, fields)) if fields is not None else None

    @classmethod
    def open(cls, path: str | Path, count: int, *, mmap: bool = True,
             error: Callable[[str], Exception] | None = None) -> PassageStore:
        """Open ``path``'s store, checking it holds ``count`` passages; ``error(what)`` builds the
        exception for a store that does not match (default: an index error naming ``path``)."""
        path = Path(path)
        fail = error or (lambda what: index_error(path, what))
        mode = "r" if mmap else None
        try:
            offsets = np.load(path / OFFSETS, mmap_mode=mode, allow_pickle=False)
            fields = np.load(path / FIELDS, mmap_mode=mode, allow_pickle=False) if (path / FIELDS).exists() else None
        except (OSError, ValueError) as e:
            raise fail(f"passage offsets unreadable ({e})") from e
        if offsets.shape != (count + 1,) or (fields is not None and fields.shape != (count, 2)):
            raise fail(f"offsets cover {len(offsets) - 1} passages, manifest says {count}")
        try:
            size = (path / PASSAGES).stat().st_size
        except OSError as e:
            raise fail(f"{PASSAGES} missing") from e
        if size != int(offsets[-1]):
            raise fail(f"{PASSAGES} has {size} bytes, expected {offsets[-1]}")
        return cls(path, offsets, fields)

    def __len__(self) -> int:
        return self._n

    def passage(self, row: int) -> Passage:
        """The passage stored at ``row`` (0-based, in build order)."""
        if not 0 <= row < self._n:
            raise IndexError(row)
        line = self._open_map()[int(self._offsets[row]) : int(self._offsets[row + 1])]
        return Passage(**json.loads(line))

    def _open_map(self) -> mmap.mmap:
        if self._mm is None:
            raise ValueError(f"{self.path}: the passage store is closed")
        return self._mm

    def hits(self, rows: np.ndarray, scores: Sequence[float]) -> list[Hit]:
        """Hits for passage ``rows`` (all >= 0) with their ``scores``, in the order given; their
        strings are read when first asked for (``StoredHit``)."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size == 0:
            return []
        scores = [float(s) for s in scores] if not isinstance(scores, list) else scores
        if self._hit_class is not None:
            return stored_hits(self._hit_class, rows.tolist(), scores)
        # An older standalone dense store has no field offsets: decode each line.
        mm = self._open_map()
        starts, ends = self._offsets[rows].tolist(), self._offsets[rows + 1].tolist()
        records = (json.loads(mm[a:b]) for a, b in zip(starts, ends))
        return [new_hit(r["id"], r["title"], r["text"], s) for r, s in zip(records, scores)]

    def hit_lists(self, rows: np.ndarray, scores: np.ndarray) -> list[list[Hit]]:
        """Per query, the hits of a (queries, k) matrix of rows and scores, best first as given;
        a slot with row -1 (nothing matched) is left out."""
        rows = np.asarray(rows)
        valid = rows >= 0
        if valid.all():  # the common case: k hits for every query
            flat = self.hits(rows.ravel(), np.asarray(scores).ravel().tolist())
            k = rows.shape[1] if rows.ndim == 2 else len(flat)
            return [flat[i : i + k] for i in range(0, len(flat), k)] if k else [[] for _ in rows]
        flat = self.hits(rows[valid], np.asarray(scores)[valid].tolist())
        out: list[list[Hit]] = []
        start = 0
        for n in valid.sum(axis=1).tolist():
            out.append(flat[start : start + n])
            start += n
        return out

    def verify(self, sha256: str) -> None:
        """Re-hash passages.jsonl against ``sha256`` (reads the whole file; open() does not)."""
        digest = hashlib.sha256()
        with open(self.path / PASSAGES, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        if digest.hexdigest() != sha256:
            raise index_error(self.path, "passages.jsonl does not match its manifest checksum")

    def close(self) -> None:
        """Close the file. The map itself is not closed here: hits made by this store may still
        read it, and it is released with the last of them."""
        self._mm = self._hit_class = None
        self._file.close()

    def __enter__(self) -> PassageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class StoreBacked(BatchSearch):
    """Base of the local indexes whose passages live in a ``PassageStore`` (``self.store``), with
    their manifest in ``self._manifest``."""

    store: PassageStore
    _manifest: dict[str, Any]

    def __len__(self) -> int:
        return len(self.store)

    @property
    def manifest(self) -> dict[str, Any]:
        return dict(self._manifest)

    def passage(self, row: int) -> Passage:
        """The passage stored at ``row`` (0-based, in build order)."""
        return self.store.passage(row)

    def close(self) -> None:
        self.store.close()
