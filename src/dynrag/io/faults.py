"""Filesystem faults as one-line errors: an OSError becomes a ``FileError`` naming the path it
concerns and the OS's reason; ``check_writable`` probes a path before work whose result would be
lost if it could not be saved."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dynrag.errors import FileError


def os_error_message(path: str | Path, exc: OSError) -> str:
    """`PATH: reason` for an OSError, e.g. "runs/x: Read-only file system"."""
    reason = exc.strerror or (errno.errorcode.get(exc.errno or 0) if exc.errno else None) or str(exc)
    return f"{path}: {reason}"


@contextmanager
def file_errors(path: str | Path, *, always: bool = False) -> Iterator[None]:
    """Turn an OSError inside the block into a FileError naming the file it concerns (the one the
    OS names, else ``path``; ``always``: ``path``, when the OS would name a temporary) and the OS's
    reason. Other exceptions pass unchanged."""
    try:
        yield
    except FileError:
        raise
    except OSError as exc:
        raise FileError(os_error_message(path if always else exc.filename or path, exc)) from exc


def check_writable(path: str | Path) -> None:
    """Fail now, with a FileError naming the path, when no file can be created at ``path``
    (a read-only disk, a missing permission, a directory in the way). Creates missing parent
    directories, as the write itself would; a full disk shows only when the data is written."""
    path = Path(path)
    if path.is_dir():
        raise FileError(f"{path}: is a directory")
    with file_errors(path, always=True):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)


@contextmanager
def build_errors(out: Path, tmp: Path) -> Iterator[None]:
    """An OSError about a path inside the temporary ``tmp`` of a build of ``out`` is a FileError
    naming ``out`` (and the file being written): the temporary is gone by the time it is read."""
    try:
        yield
    except FileError:
        raise
    except OSError as exc:
        name = str(exc.filename or "")
        inside = name.startswith(str(tmp))
        where = f" (writing {Path(name).relative_to(tmp)})" if inside and name != str(tmp) else ""
        raise FileError(os_error_message(out if inside or not name else name, exc) + where) from exc
