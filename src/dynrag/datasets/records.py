"""Raw records of benchmark files, each with the line it starts on: JSON lists, JSONL, TSV.

A JSON list is decoded one record at a time (``raw_decode`` over the file text), so a bad record
can be named by its line and index rather than only "somewhere in this file". A syntax error
inside a JSON list cannot be stepped over and is always an error; a bad JSONL line is a record
that ``--skip-bad`` can skip.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dynrag.errors import DataError, json_error, json_problem, unencodable

_WS = re.compile(r"\s*")


class BadRecord(Exception):
    """A record that cannot be used; the message says why (the caller adds file and line)."""


class BadJSON(BadRecord):
    """A JSONL line that is not JSON: not yet a record, so its message names no record index."""


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError as exc:
        raise DataError(str(path), "no such file") from exc
    except IsADirectoryError as exc:
        raise DataError(str(path), "is a directory, expected a file") from exc
    except UnicodeDecodeError as exc:
        raise DataError(str(path), f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise DataError(str(path), f"cannot read ({exc.strerror or exc})") from exc


def first_char(path: Path) -> str:
    """The first non-blank character of a file ('' when empty): tells a JSON list from JSONL."""
    text = read_text(path)
    match = _WS.match(text)
    return text[match.end() : match.end() + 1] if match else ""


def iter_json_array(path: Path) -> Iterator[tuple[int, int, Any]]:
    """(line, index, record) for each element of a top-level JSON list."""
    text = read_text(path)
    decoder = json.JSONDecoder()
    n = len(text)

    def line_at(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    pos = _WS.match(text, 0).end()
    if pos >= n or text[pos] != "[":
        raise DataError(str(path), "expected a JSON list of records", line_at(pos) if pos < n else None)
    pos = _WS.match(text, pos + 1).end()
    if pos < n and text[pos] == "]":
        return
    line, counted_to, index = 1, 0, 0
    escapes = "\\u" in text
    while True:
        line += text.count("\n", counted_to, pos)
        counted_to = pos
        try:
            record, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise json_error(path, exc) from exc
        yield line, index, _encodable(record, escapes)
        index += 1
        pos = _WS.match(text, end).end()
        if pos < n and text[pos] == ",":
            pos = _WS.match(text, pos + 1).end()
            continue
        if pos < n and text[pos] == "]":
            if _WS.match(text, pos + 1).end() != n:
                raise DataError(str(path), "unexpected text after the JSON list", line_at(pos + 1))
            return
        raise DataError(str(path), f"expected ',' or ']' after record {index - 1}", line_at(min(pos, n)))


def _encodable(record: Any, escapes: bool) -> Any:
    """The record, or a BadRecord when it holds text UTF-8 cannot encode (only a ``\\u`` escape
    in the JSON can make such text, so without one there is nothing to look for)."""
    problem = unencodable(record) if escapes else None
    return record if problem is None else BadRecord(problem)


def iter_jsonl(path: Path) -> Iterator[tuple[int, int, Any]]:
    """(line, index, record) per non-blank line; an undecodable line yields a BadRecord."""
    try:
        f = open(path, encoding="utf-8-sig")
    except FileNotFoundError as exc:
        raise DataError(str(path), "no such file") from exc
    except OSError as exc:
        raise DataError(str(path), f"cannot read ({exc.strerror or exc})") from exc
    with f:
        index = 0
        line_no = 0
        while True:
            try:
                line = f.readline()
            except UnicodeDecodeError as exc:
                raise DataError(str(path), f"not UTF-8 text ({exc.reason})", line_no + 1) from exc
            except OSError as exc:
                raise DataError(str(path), f"cannot read ({exc.strerror or exc})", line_no + 1) from exc
            if not line:
                return
            line_no += 1
            if not line.strip():
                continue
            try:
                record: Any = json.loads(line)
            except json.JSONDecodeError as exc:
                record = BadJSON(json_problem(exc))
            else:
                record = _encodable(record, "\\u" in line)
            yield line_no, index, record
            index += 1


def iter_tsv(path: Path) -> Iterator[tuple[int, int, Any]]:
    """(line, index, row dict) per data row of a TSV file with a header row."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    try:
        f = open(path, encoding="utf-8-sig", newline="")
    except FileNotFoundError as exc:
        raise DataError(str(path), "no such file") from exc
    with f:
        reader = csv.reader(f, delimiter="\t")
        try:
            header = next(reader, None)
        except (csv.Error, UnicodeDecodeError) as exc:
            raise DataError(str(path), f"unreadable TSV header ({exc})", 1) from exc
        if not header:
            raise DataError(str(path), "empty file: expected a TSV header row", 1)
        header = [h.strip() for h in header]
        index = 0
        while True:
            start = reader.line_num + 1
            try:
                row = next(reader, None)
            except (csv.Error, UnicodeDecodeError) as exc:
                raise DataError(str(path), f"unreadable TSV row ({exc})", start) from exc
            if row is None:
                return
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                record: Any = BadRecord(f"has {len(row)} columns, the header has {len(header)}")
            else:
                record = dict(zip(header, row))
            yield start, index, record
            index += 1


def list_or_lines(path: Path) -> Iterator[tuple[int, int, Any]]:
    """A JSON list of records, or one record a line: the file's first character tells which (the
    official HotpotQA files are lists and MuSiQue's are JSONL; released subsets of each come the
    other way too)."""
    return iter_json_array(path) if first_char(path) in ("[", "") else iter_jsonl(path)
