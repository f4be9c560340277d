"""Writing a passage store: ``PassageWriter`` streams passages into passages.jsonl, offsets.npy and
fields.npy, and ``check_replaceable`` refuses to build over a directory that is not an index."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dynrag.corpus.passage import Passage
from dynrag.errors import DynragError, IndexDirError
from dynrag.retrieval.manifest import MANIFEST
from dynrag.retrieval.passage_lines import encode_line
from dynrag.retrieval.store import FIELDS, OFFSETS, PASSAGES

# Files that mark a directory as (the remains of) an index, so a rebuild may replace it.
_INDEX_MARKERS = (MANIFEST, PASSAGES, "params.index.json")


def check_replaceable(out: Path) -> None:
    """Refuse to replace a directory that is not (the remains of) an index: --out may be a typo."""
    if not out.exists():
        return
    if not out.is_dir():
        raise IndexDirError(f"{out}: exists and is not a directory; choose another --out")
    if any(out.iterdir()) and not any((out / m).exists() for m in _INDEX_MARKERS):
        raise IndexDirError(
            f"{out}: exists and is not a dynrag BM25 index; refusing to replace it "
            "(choose another --out or empty it)"
        )


class DuplicatePassageId(DynragError):
    """Two passages of one corpus share an id (ids name passages in hits, traces and support)."""


class PassageWriter:
    """Streams passages into ``directory``'s store a batch at a time; memory holds one batch plus
    20 bytes a passage. With ``directory=None`` the lines are only counted and hashed (a dense part
    checking it has the rows of its parent's store). ``finish`` refuses a corpus in which two
    passages share an id."""

    def __init__(self, directory: Path | None):
        self.directory = directory
        self.count = 0
        self._digest = hashlib.sha256()
        self._position = 0
        self._offsets: list[np.ndarray] = []
        self._fields: list[np.ndarray] = []
        self._id_hashes: list[np.ndarray] = []  # 8 bytes a passage: duplicates are found at the end
        self._out = open(directory / PASSAGES, "wb") if directory is not None else None

    def add(self, batch: Sequence[Passage]) -> None:
        if self._out is not None:
            self._id_hashes.append(np.fromiter((hash(p.id) for p in batch), np.int64, len(batch)))
        encoded = [encode_line(p) for p in batch]
        lines = [e[0] for e in encoded]
        blob = b"".join(lines)
        self._digest.update(blob)
        if self._out is not None:
            self._out.write(blob)
            sizes = np.fromiter(map(len, lines), np.int64, len(lines))
            offsets = np.empty(len(lines), dtype=np.int64)
            offsets[0] = self._position
            np.cumsum(sizes[:-1], out=offsets[1:])
            offsets[1:] += self._position
            self._offsets.append(offsets)
            self._fields.append(np.array([e[1:] for e in encoded], dtype=np.uint32))
        self._position += len(blob)
        self.count += len(batch)

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()

    def finish(self) -> None:
        """Close passages.jsonl and write offsets.npy and fields.npy; an empty corpus is an error."""
        self.close()
        if self.count == 0:
            raise DynragError("nothing to index: the corpus yielded no passages")
        if self.directory is None:
            return
        offsets = np.concatenate(self._offsets + [np.array([self._position], dtype=np.int64)])
        np.save(self.directory / OFFSETS, offsets, allow_pickle=False)
        np.save(self.directory / FIELDS, np.concatenate(self._fields), allow_pickle=False)
        self._offsets.clear()
        self._fields.clear()
        self._check_unique_ids(offsets)

    def _check_unique_ids(self, offsets: np.ndarray) -> None:
        hashes = np.concatenate(self._id_hashes)
        self._id_hashes.clear()
        order = np.argsort(hashes, kind="stable")
        ordered = hashes[order]
        same = np.flatnonzero(ordered[1:] == ordered[:-1])
        if not same.size:
            return
        with open(self.directory / PASSAGES, "rb") as f:  # type: ignore[operator]

            def passage_id(row: int) -> str:
                f.seek(int(offsets[row]))
                return json.loads(f.read(int(offsets[row + 1] - offsets[row])))["id"]

            for j in same[:1000].tolist():  # equal hashes of different ids are possible, if rare
                first, second = sorted((int(order[j]), int(order[j + 1])))
                if passage_id(first) == passage_id(second):
                    raise DuplicatePassageId(
                        f"duplicate passage id {passage_id(first)!r}: passages {first + 1:,} and {second + 1:,} "
                        "of the corpus both have it; ids name passages in hits, traces and supporting-passage "
                        "matching, so each needs its own"
                    )

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
