"""Atomic, durable file writes (temporary sibling, fsync, rename, fsync the directory: a crash
leaves the old file or the new one, never a mix), and reading a JSON file back."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from dynrag.errors import DataError, json_problem
from dynrag.io.faults import build_errors, file_errors
from dynrag.io.scratch import WRITE, hold, new_temp_file, remove_stale_builds


def fsync_dir(directory: str | Path) -> None:
    """Make renames inside ``directory`` durable; best effort (not every platform can)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_file(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file to stream into; on success it replaces ``path`` atomically and durably.

    For content too large to hold in memory (joined model weights); an error leaves ``path`` as
    it was and removes the temporary file. The file ends with the mode a plain open() gives a new
    file (0666 less the umask), whatever mode ``path`` had.
    """
    path = Path(path)
    with file_errors(path, always=True):
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_builds(path)
        fd, tmp = new_temp_file(path.parent, f".{path.name}.{WRITE}-{os.getpid()}-", ".tmp")
        hold(fd)
    try:
        with build_errors(path, tmp):
            with os.fdopen(fd, "wb") as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably (temp file, fsync, rename, fsync dir)."""
    with atomic_file(path) as f:
        f.write(data)


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, data: Any, indent: int | None = 2) -> None:
    atomic_write_text(path, json.dumps(data, ensure_ascii=False, indent=indent) + "\n")


def read_json(path: str | Path, what: str) -> Any:
    """The JSON value in `path`; a file that cannot be read or parsed is a DataError naming it
    and `what` it should have held ("unreadable run config (...)")."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise DataError(str(path), f"unreadable {what}: {json_problem(exc)}") from exc
    except OSError as exc:
        raise DataError(str(path), f"unreadable {what} ({exc})") from exc


def file_sha256(path: str | Path, shown: str | Path | None = None) -> str:
    """sha256 of a file, read in blocks; a read error names ``shown`` (the path as the user gave it)
    or ``path``."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise DataError(str(shown or path), f"cannot read ({exc.strerror or exc})") from exc
    return digest.hexdigest()
