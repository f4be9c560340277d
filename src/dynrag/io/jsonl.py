"""JSONL files: fsynced appends of one record per line, and a reader that drops a torn last line
and names ``file:line`` for any other bad one."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dynrag.errors import DataError, DynragError, json_problem
from dynrag.io.faults import file_errors, os_error_message


def json_line(record: Any) -> str:
    """One JSONL line (with its newline) for ``record``."""
    return json.dumps(record, ensure_ascii=False) + "\n"


class JsonlAppender:
    """Appends one JSON record per line; each is on disk (fsynced) when ``append`` returns."""

    def __init__(self, path: str | Path, fsync: bool = True):
        self.path = Path(path)
        self._fsync = fsync
        with file_errors(self.path):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Unbuffered: each record is one write() call, so a fault (a full disk) surfaces in the
            # append that caused it and tears at most that line.
            self._f = open(self.path, "ab", buffering=0)

    def append(self, record: Any) -> None:
        data = json_line(record).encode("utf-8")
        with file_errors(self.path):
            written = self._f.write(data)  # one write call: a crash tears one line at most
            if written is not None and written < len(data):
                self._f.write(data[written:])  # a short write (signal): finish the line
            if self._fsync:
                os.fsync(self._f.fileno())

    def close(self) -> None:
        with file_errors(self.path):
            self._f.close()

    def __enter__(self) -> "JsonlAppender":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_jsonl(
    path: str | Path,
    *,
    repair: bool = False,
    validate: Callable[[Any], str | None] | None = None,
    whole: bool = False,
) -> list[Any]:
    """The records of a JSONL file ([] when it does not exist).

    A last line without its newline, or one that does not decode, is a write cut short by a crash:
    it is dropped, and with ``repair`` truncated from the file so the next append starts clean.
    A bad line anywhere else is a ``DataError`` naming the file and line. ``validate(record)``
    returns an error message for a record of the wrong shape (treated as a bad line). ``whole``:
    the file is written in one piece (atomically, never appended to), so a bad last line is an
    error too, and a missing final newline is accepted.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except IsADirectoryError as exc:
        raise DataError(str(path), "is a directory, expected a JSONL file") from exc
    except OSError as exc:
        raise DynragError(os_error_message(path, exc)) from exc
    records: list[Any] = []
    good_end = pos = line_no = 0
    while pos < len(data):
        line_no += 1
        nl = data.find(b"\n", pos)
        end = len(data) if nl < 0 else nl + 1
        raw = data[pos:end]
        is_last = end >= len(data)
        if raw.strip():
            problem = None
            record = None
            if nl < 0 and not whole:
                problem = "line not terminated"
            else:
                try:
                    record = json.loads(raw)
                except (ValueError, UnicodeDecodeError) as exc:
                    problem = json_problem(exc)
                if problem is None and validate is not None:
                    problem = validate(record)
            if problem is not None:
                if is_last and not whole:
                    break  # torn last write: drop it
                raise DataError(str(path), problem, line_no)
            records.append(record)
        good_end = pos = end
    if repair and good_end < len(data):
        with open(path, "r+b") as f:
            f.truncate(good_end)
            f.flush()
            os.fsync(f.fileno())
    return records
