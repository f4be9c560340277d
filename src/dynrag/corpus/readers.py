"""Streaming corpus readers: JSONL, DPR-style TSV and folders of text/markdown files.

Every reader is a generator that holds one record at a time, so reading a corpus costs the same
memory whether it has a thousand passages or twenty million. Bad input raises DataError naming
the file (and the 1-based line where there is one) instead of a parser traceback.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dynrag.corpus.passage import Passage
from dynrag.errors import DataError, DynragError, json_error, unencodable
from dynrag.io.files import file_sha256

FOLDER_SUFFIXES = (".txt", ".md")

SUPPORTED_KINDS = (
    ".jsonl (one JSON object per line with id, text and optional title)",
    ".tsv (DPR-style, header id<TAB>text<TAB>title)",
    "a folder of .txt/.md files",
)

# An ATX heading ("# Title", "## Title ##"); setext headings are rare in corpora and left out.
_MD_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


def read_passages(source: str | Path) -> Iterator[Passage]:
    """Stream the passages of a corpus file or folder, choosing the reader from the path.

    The path is checked here, before the first passage is asked for, so a typo fails at once. A
    source that yields no passage is a DataError naming it and saying why (an empty file, a header
    only, a folder without .txt/.md files ...).
    """
    path = Path(source)
    if not path.exists():
        raise DataError(str(path), "no such file or directory")
    if path.is_dir():
        return _not_empty(read_folder(path), path, lambda: _why_empty_folder(path))
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _not_empty(read_jsonl(path), path, lambda: _why_empty_file(path, "JSON lines"))
    if suffix == ".tsv":
        return _not_empty(read_tsv(path), path, lambda: "no passages: the file has a header row and no rows")
    raise DynragError(
        f"{path}: unsupported corpus kind {suffix or '(no suffix)'!r}; supported: "
        + "; ".join(SUPPORTED_KINDS)
    )


def _not_empty(passages: Iterator[Passage], path: Path, why) -> Iterator[Passage]:
    count = 0
    for passage in passages:
        count += 1
        yield passage
    if count == 0:
        raise DataError(str(path), f"nothing to index: {why()}")


def _why_empty_file(path: Path, what: str) -> str:
    size = path.stat().st_size
    return "the file is empty" if size == 0 else f"the file holds only blank lines ({size:,} bytes, no {what})"


def _why_empty_folder(root: Path) -> str:
    if _folder_files(root):
        return "every .txt/.md file in the folder is empty"
    found = sorted(e.name for e in root.iterdir() if not e.name.startswith("."))
    hint = ""
    if root.suffix.lower() in (".jsonl", ".tsv"):
        hint = f"; {root.name} is a folder, not a {root.suffix} file: pass the file itself"
    shown = f" (it holds {', '.join(found[:4])}{', ...' if len(found) > 4 else ''})" if found else " (it is empty)"
    return f"a folder with no .txt or .md files{shown}{hint}"


def source_stamps(source: str | Path, content: bool = True) -> dict:
    """Size, modification time and (with ``content``) sha256 of each file a corpus is read from,
    for the index manifest: an index can then tell that its corpus changed since it was built
    (``changed_sources``). The hash lets a copy or a remount, which changes the time alone, pass."""
    path = Path(source).absolute()
    if path.is_dir():
        files = [(rel, path / rel) for rel in _folder_files(path)]
        kind = "folder"
    else:
        files = [(path.name, path)]
        kind = "file"
    stamps = []
    for name, file in files:
        st = file.stat()
        stamp = {"path": name, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        if content:
            stamp["sha256"] = file_sha256(file)
        stamps.append(stamp)
    return {"path": str(path), "kind": kind, "files": stamps}


def changed_sources(recorded: dict) -> list[str]:
    """What differs between a corpus as recorded by ``source_stamps`` and as it is now, in words
    (e.g. "corpus.jsonl: 1,024 -> 2,048 bytes"); [] when nothing did (or nothing was recorded)."""
    if not isinstance(recorded, dict) or not isinstance(recorded.get("files"), list) or "path" not in recorded:
        return []
    root = Path(recorded["path"])
    if not root.exists():
        return [f"{root} no longer exists"]
    try:
        now = {f["path"]: f for f in source_stamps(root, content=False)["files"]}
    except OSError as exc:
        return [f"{root}: cannot be read ({exc.strerror or exc})"]
    then = {f.get("path"): f for f in recorded["files"] if isinstance(f, dict)}
    changes = []
    for name, old in then.items():
        new = now.get(name)
        if new is None:
            changes.append(f"{name} removed")
        elif new["size"] != old.get("size"):
            changes.append(f"{name}: {old.get('size', 0):,} -> {new['size']:,} bytes")
        elif new["mtime_ns"] != old.get("mtime_ns") and not same_content(root, name, old):
            changes.append(f"{name} modified")
    changes += [f"{name} added" for name in now if name not in then]
    # benchmark files whose paragraphs `dynrag index --add-contexts` put in the index
    changes += [c for added in recorded.get("added_contexts") or [] for c in changed_sources(added)]
    return changes
def same_content(root: Path, name: str, recorded: dict) -> bool:
    """Whether a file whose time changed still holds what was recorded (False when no hash was)."""
    if not isinstance(recorded.get("sha256"), str):
        return False
    file = root / name if root.is_dir() else root
    try:
        return file_sha256(file) == recorded["sha256"]
    except DataError:
        return False


def count_records(source: str | Path) -> int | None:
    """The number of passages a JSONL or TSV corpus holds, by counting lines (no parsing: a few
    seconds a GB), for a progress bar's ETA; None for a folder or another kind."""
    path = Path(source)
    suffix = path.suffix.lower()
    if not path.is_file() or suffix not in (".jsonl", ".tsv"):
        return None
    lines = 0
    last = b"\n"
    f = _open_binary(path)
    with f, _read_errors(path):
        for block in iter(lambda: f.read(1 << 22), b""):
            lines += block.count(b"\n")
            last = block[-1:]
    lines += last != b"\n"
    return max(lines - (suffix == ".tsv"), 0)


def read_jsonl(path: str | Path) -> Iterator[Passage]:
    """Yield one Passage per non-blank line of a JSONL file of {id, title?, text} objects."""
    path = Path(path)
    f = _open_binary(path)
    with f, _read_errors(path):
        # Binary lines so that a non-UTF-8 byte is reported with its line, not mid-iteration.
        for lineno, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except ValueError as e:  # JSONDecodeError and UnicodeDecodeError
                raise json_error(path, e, lineno) from e
            if b"\\u" in raw:  # only an escape can make text that UTF-8 cannot encode
                problem = unencodable(record)
                if problem is not None:
                    raise DataError(str(path), problem, lineno)
            yield _passage_from_record(record, str(path), lineno)


def _open_binary(path: Path):
    """The file opened for reading bytes; an OS refusal is a DataError naming it and why."""
    try:
        return open(path, "rb")
    except OSError as e:
        raise DataError(str(path), f"cannot open: {e.strerror or e}") from e


@contextmanager
def _read_errors(path: Path) -> Iterator[None]:
    """A read that fails after the file opened (an I/O error, a file that is not really one) is
    a DataError naming the file and the OS's reason."""
    try:
        yield
    except OSError as e:
        raise DataError(str(path), f"cannot read: {e.strerror or e}") from e


def read_tsv(path: str | Path) -> Iterator[Passage]:
    """Yield passages from a DPR-style TSV (psgs_w100.tsv) whose header names id, text, title."""
    path = Path(path)
    f = _open_binary(path)
    with f, _read_errors(path):
        # Lines are decoded one at a time, so a bad byte is reported on its own line (a text-mode
        # file decodes a block ahead, and csv's line count then names an earlier line).
        reader = csv.reader(_decoded_lines(f, path), delimiter="\t")
        try:
            header = next(reader, None)
            if header is None:
                raise DataError(str(path), "empty file: expected a header id<TAB>text<TAB>title", 1)
            columns = [h.strip().lower() for h in header]
            if "id" not in columns or "text" not in columns:
                raise DataError(
                    str(path),
                    f"header must name the columns id, text and optionally title; found {header!r}",
                    1,
                )
            i_id, i_text = columns.index("id"), columns.index("text")
            i_title = columns.index("title") if "title" in columns else None
            width = len(columns)
            for row in reader:
                if not row:  # csv yields [] for a blank line
                    continue
                if len(row) != width:
                    raise DataError(
                        str(path),
                        f"expected {width} tab-separated fields, found {len(row)}",
                        reader.line_num,
                    )
                title = row[i_title] if i_title is not None else ""
                yield Passage(id=row[i_id], title=title, text=row[i_text])
        except csv.Error as e:
            raise DataError(str(path), f"malformed TSV: {e}", reader.line_num) from e


def _decoded_lines(f, path: Path) -> Iterator[str]:
    for number, raw in enumerate(f, start=1):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataError(str(path), f"not UTF-8 text: {e.reason} at byte {e.start} of the line", number) from e


def read_folder(root: str | Path) -> Iterator[Passage]:
    """Yield one passage per .txt/.md file under root (recursive, sorted by relative path).

    Hidden files and folders (name starting with ".") are skipped, as are files that hold only
    whitespace: they have nothing to retrieve.
    """
    root = Path(root)
    for rel in _folder_files(root):
        path = root / rel
        try:
            content = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise DataError(str(path), f"not UTF-8 text: {e.reason} at byte {e.start}") from e
        except OSError as e:
            raise DataError(str(path), f"cannot read: {e.strerror or e}") from e
        if not content.strip():
            continue
        yield Passage(id=rel, title=_title_for(path, content), text=content)


def _folder_files(root: Path) -> list[str]:
    # Sorting needs every path up front; only relative paths are held, never contents.
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if name.startswith(".") or not name.lower().endswith(FOLDER_SUFFIXES):
                continue
            rel = Path(dirpath, name).relative_to(root).as_posix()
            found.append(rel)
    found.sort()
    return found


def _title_for(path: Path, content: str) -> str:
    if path.suffix.lower() == ".md":
        m = _MD_HEADING.search(content)
        if m:
            return m.group(1).strip()
    return path.stem


def _passage_from_record(record: object, path: str, lineno: int) -> Passage:
    if not isinstance(record, dict):
        raise DataError(path, f"expected a JSON object, found {type(record).__name__}", lineno)
    pid = record.get("id")
    # bool is an int subclass; an id of true/false is almost surely a mistake.
    if isinstance(pid, int) and not isinstance(pid, bool):
        pid = str(pid)
    if not isinstance(pid, str):
        raise DataError(path, "missing or non-string/int field 'id'", lineno)
    text = record.get("text")
    if not isinstance(text, str):
        raise DataError(path, "missing or non-string field 'text'", lineno)
    title = record.get("title")
    if title is None:
        title = ""
    elif not isinstance(title, str):
        raise DataError(path, "field 'title' must be a string", lineno)
    return Passage(id=pid, title=title, text=text)
