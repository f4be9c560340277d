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
import sys
from collections import deque
from collections.abc import Callable, Sequence
from itertools import repeat
from json.decoder import scanstring  # type: ignore[attr-defined]
from json.encoder import encode_basestring, encode_basestring_ascii  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from dynrag.corpus.passage import Passage
from dynrag.errors import DynragError, IndexDirError
from dynrag.retrieval.base import BatchSearch, Hit

PASSAGES, OFFSETS, FIELDS, MANIFEST = "passages.jsonl", "offsets.npy", "fields.npy", "manifest.json"
PARENTS = "parents.jsonl"  # the large chunks of an index chunked small-to-big
# The format of an index directory (the BM25 index owns the directory and its manifest).
INDEX_FORMAT = "dynrag-bm25"
INDEX_FORMAT_VERSION = 1
REBUILD = "rebuild it with `dynrag index SOURCE --out {path}`"

# Line layout written by encode_line; hit_lists slices the string literals out by these lengths.
_ID_PREFIX, _TITLE_SEP, _TEXT_SEP, _LINE_END = '{"id": ', ', "title": ', ', "text": ', "}\n"
# Files that mark a directory as (the remains of) an index, so a rebuild may replace it.
_INDEX_MARKERS = (MANIFEST, PASSAGES, "params.index.json")


def index_error(path: Path, what: str, rebuild: str = REBUILD) -> IndexDirError:
    """One-line error naming the index directory and how to rebuild it."""
    return IndexDirError(f"{path}: {what}; {rebuild.format(path=path)}")


def notice(message: str) -> None:
    """One line on stderr about long work about to happen (shown with or without progress bars;
    a bar being drawn is moved below it)."""
    from tqdm import tqdm

    tqdm.write(message, file=sys.stderr)


def progress_bar(total: int | None, desc: str, enabled: bool) -> Any:
    """The ingest progress bar (rate and ETA) every index build shows on stderr."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=" passages", disable=not enabled, file=sys.stderr,
                mininterval=0.5, dynamic_ncols=True)


# ---- manifests ----------------------------------------------------------------------------------


def load_manifest_json(path: Path, missing: str, rebuild: str = REBUILD) -> dict[str, Any]:
    """``path/manifest.json`` as a dict; ``missing`` says what its absence means."""
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise index_error(path, missing, rebuild) from e
    except (OSError, ValueError) as e:
        raise index_error(path, f"manifest.json unreadable ({e})", rebuild) from e
    if not isinstance(manifest, dict):
        raise index_error(path, "manifest.json is not an object", rebuild)
    return manifest


def check_manifest(
    manifest: dict[str, Any], path: Path, *, format: str, version: int, count_key: str, rebuild: str = REBUILD
) -> dict[str, Any]:
    """The checks every index manifest passes: format, version, a positive count, a checksum."""
    if manifest.get("format") != format:
        raise index_error(path, f"manifest.json format is {manifest.get('format')!r}, expected {format!r}", rebuild)
    found = manifest.get("format_version")
    if found != version:
        raise index_error(path, f"index format version {found!r} is not supported (expected {version})", rebuild)
    count = manifest.get(count_key)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise index_error(path, f"manifest.json {count_key} {count!r} is invalid", rebuild)
    if not isinstance(manifest.get("corpus_sha256"), str):
        raise index_error(path, "manifest.json has no corpus_sha256", rebuild)
    return manifest


def read_manifest(index_dir: str | Path) -> dict[str, Any]:
    """The validated manifest of an index directory (``dynrag index``'s output)."""
    path = Path(index_dir)
    manifest = load_manifest_json(path, "manifest.json missing (not a BM25 index?)")
    return check_manifest(manifest, path, format=INDEX_FORMAT, version=INDEX_FORMAT_VERSION, count_key="passage_count")


def corpus_changes(index_dir: str | Path) -> str | None:
    """A warning when the corpus an index was built from has changed since (size or modification
    time of a source file, files added or removed), else None; for indexes that recorded their
    sources (``dynrag index`` does)."""
    from dynrag.corpus import changed_sources

    try:
        manifest = read_manifest(index_dir)
    except IndexDirError:
        return None  # the command's own load says what is wrong
    sources = manifest.get("sources")
    changes = changed_sources(sources) if sources else []
    if not changes:
        return None
    shown = "; ".join(changes[:3]) + (f"; and {len(changes) - 3} more" if len(changes) > 3 else "")
    return (
        f"{index_dir} was built from {sources['path']}, which has changed since ({shown}); answers use the "
        f"passages as they were: rebuild with `dynrag index {sources['path']} --out {index_dir}`"
    )


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


# ---- writing ------------------------------------------------------------------------------------


def _layout(pid: str, title: str, text: str) -> tuple[str, int, int]:
    title_at = len(_ID_PREFIX) + len(pid) + len(_TITLE_SEP)
    text_at = title_at + len(title) + len(_TEXT_SEP)
    line = "".join((_ID_PREFIX, pid, _TITLE_SEP, title, _TEXT_SEP, text, _LINE_END))
    return line, title_at, text_at


def encode_line(p: Passage) -> tuple[bytes, int, int]:
    """One passages.jsonl line and the character offsets of its title and text literals."""
    line, title_at, text_at = _layout(encode_basestring(p.id), encode_basestring(p.title), encode_basestring(p.text))
    try:
        return line.encode("utf-8"), title_at, text_at
    except UnicodeEncodeError:
        # A lone surrogate (from a "\ud800" escape in the source JSON) has no UTF-8 form;
        # \u-escaping the whole line, as json.dumps does by default, still round-trips.
        line, title_at, text_at = _layout(
            encode_basestring_ascii(p.id), encode_basestring_ascii(p.title), encode_basestring_ascii(p.text)
        )
        return line.encode("ascii"), title_at, text_at


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


# ---- reading ------------------------------------------------------------------------------------


def _fast_hit_factory() -> Callable[[str, str, str, float], Hit]:
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


new_hit = _fast_hit_factory()


class _Lines:
    """passages.jsonl memory-mapped with its line offsets and field offsets: what a StoredHit reads
    its strings from. Hits keep it alive, so they stay readable after their store is closed (the
    map goes when the last of them does; on Linux it also survives the index being rebuilt)."""

    __slots__ = ("mm", "offsets", "fields")

    def __init__(self, mm: mmap.mmap, offsets: np.ndarray, fields: np.ndarray):
        # Plain ndarray views: slicing a np.memmap runs its Python __array_finalize__ (~1 µs).
        self.mm, self.offsets, self.fields = mm, offsets.view(np.ndarray), fields.view(np.ndarray)

    def strings(self, row: int) -> tuple[str, str, str]:
        """(id, title, text) of the passage at ``row``, sliced out of its line."""
        offsets, fields = self.offsets, self.fields
        line = self.mm[offsets.item(row) : offsets.item(row + 1)].decode("utf-8")
        a, b = fields.item(row, 0), fields.item(row, 1)
        id_at = len(_ID_PREFIX) + 1
        # A line without backslashes holds its strings verbatim between the quotes, so only
        # lines with escapes pay for a JSON string scan.
        if line.find("\\", id_at) < 0:
            return (line[id_at : a - len(_TITLE_SEP) - 1], line[a + 1 : b - len(_TEXT_SEP) - 1],
                    line[b + 1 : -len(_LINE_END) - 1])
        return scanstring(line, id_at)[0], scanstring(line, a + 1)[0], scanstring(line, b + 1)[0]


_get_id, _get_title, _get_text = Hit.id.__get__, Hit.title.__get__, Hit.text.__get__  # type: ignore[attr-defined]
_set_id, _set_title, _set_text = Hit.id.__set__, Hit.title.__set__, Hit.text.__set__  # type: ignore[attr-defined]
_set_score = Hit.score.__set__  # type: ignore[attr-defined]


class StoredHit(Hit):
    """A Hit whose id, title and text are read from the passage store when first asked for.

    A search makes ten or more hits per query, and most callers read a few of them (or none:
    recall counts ids of the top k, fusion re-ranks candidates); cutting every string out up
    front cost 1.5-2 µs a hit, as much as the search itself on a corpus of 20k passages. A
    StoredHit costs the object, its row and its score. It is a ``Hit`` in every other way: frozen,
    equal to (and hashed like) the eager Hit with the same fields; ``dataclasses.replace`` gives
    an eager one, copying and pickling a plain ``Hit``. Each store makes its own subclass, whose
    ``_lines`` says where its strings are (one attribute less to set per hit)."""

    __slots__ = ("_row",)  # the passage's row until its strings are read, then -1
    _lines: ClassVar[_Lines | None] = None

    def __init__(self, id: str, title: str, text: str, score: float):  # what replace() calls: eager
        _set_id(self, id)
        _set_title(self, title)
        _set_text(self, text)
        _set_score(self, score)
        _set_row(self, -1)

    def _read(self) -> None:
        pid, title, text = self._lines.strings(_get_row(self))  # type: ignore[union-attr]
        _set_id(self, pid)
        _set_title(self, title)
        _set_text(self, text)
        _set_row(self, -1)

    @property  # type: ignore[override]
    def id(self) -> str:
        if _get_row(self) >= 0:
            self._read()
        return _get_id(self)

    @property  # type: ignore[override]
    def title(self) -> str:
        if _get_row(self) >= 0:
            self._read()
        return _get_title(self)

    @property  # type: ignore[override]
    def text(self) -> str:
        if _get_row(self) >= 0:
            self._read()
        return _get_text(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Hit):
            return NotImplemented
        return (self.id, self.title, self.text, self.score) == (other.id, other.title, other.text, other.score)

    __hash__ = Hit.__hash__

    def __reduce__(self) -> tuple[type, tuple[str, str, str, float]]:
        return Hit, (self.id, self.title, self.text, self.score)


_get_row, _set_row = StoredHit._row.__get__, StoredHit._row.__set__  # type: ignore[attr-defined]
_consume = deque(maxlen=0).extend  # runs a map for its side effects at C speed


def stored_hit_class(lines: _Lines) -> type[StoredHit]:
    """The StoredHit subclass of one store."""
    return type("StoredHit", (StoredHit,), {"__slots__": (), "_lines": lines, "__module__": __name__})


def stored_hits(cls: type[StoredHit], rows: list[int], scores: list[float]) -> list[Hit]:
    """Hits of class ``cls`` for ``rows`` with their ``scores``, made in bulk: each loop runs in C."""
    out: list[Hit] = list(map(Hit.__new__, repeat(cls, len(rows))))
    _consume(map(_set_row, out, rows))
    _consume(map(_set_score, out, scores))
    return out


class PassageStore:
    """The passages of one directory, memory-mapped; open with ``PassageStore.open``."""

    def __init__(self, path: Path, offsets: np.ndarray, fields: np.ndarray | None):
        self.path = path
        self._offsets = offsets
        self._fields = fields
        self._n = len(offsets) - 1
        self._file = open(path / PASSAGES, "rb")
        self._mm: mmap.mmap | None = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        self._hit_class = stored_hit_class(_Lines(self._mm, offsets, fields)) if fields is not None else None

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
