"""Crash-safe file operations every package shares (floor 0: imports nothing of dynrag but errors).

- ``atomic_write_bytes/text/json`` (and ``atomic_file`` to stream into): write a temporary
  sibling, fsync it, rename it over the target, fsync the directory. A crash leaves the old file
  or the new one, never a mix.
- ``atomic_directory``: build a directory in a temporary sibling ``.NAME.build-PID-XXXX`` and swap it
  into place only when complete (the old one is moved aside first and deleted afterwards); an error
  removes the half-built directory. Builds and file writes left behind by killed processes are
  removed at the next build or write of the same name (``remove_stale_builds``): a temporary is
  stale when its process is gone, or when no process holds the flock its builder keeps on it
  (a killed builder's pid may since belong to another process).
- ``JsonlAppender``: one record per line, each written in a single call, flushed and fsynced before
  ``append`` returns, so a crash loses at most the line being written.
- ``read_jsonl``: records of a JSONL file; a torn last line (a write cut short) is dropped (and
  with ``repair`` truncated away), any other bad line is a ``DataError`` naming ``file:line``.
- ``DirectoryLock``: an exclusive OS lock (flock) held for a process's life; a second holder fails
  at once with the first holder's pid.

A filesystem fault (read-only or full disk, no permission, an I/O error) in any of these is a
``FileError`` naming the path and the OS's reason, which the CLI prints as one line;
``check_writable`` probes a path before work whose result would be lost if it could not be saved.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from dynrag.errors import DataError, DynragError, FileError

__all__ = [
    "DirectoryLock",
    "JsonlAppender",
    "LockedError",
    "atomic_directory",
    "atomic_file",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "check_writable",
    "file_errors",
    "fsync_dir",
    "fsync_tree",
    "json_line",
    "os_error_message",
    "read_jsonl",
    "remove_stale_builds",
    "swap_directory",
]


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


# ---- files ------------------------------------------------------------------------------------


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


def fsync_tree(directory: str | Path) -> None:
    """fsync every file under ``directory`` and every directory in it (before a rename publishes it)."""
    for root, dirs, files in os.walk(directory):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(root)


@contextmanager
def atomic_file(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file to stream into; on success it replaces ``path`` atomically and durably.

    For content too large to hold in memory (joined model weights); an error leaves ``path`` as
    it was and removes the temporary file.
    """
    path = Path(path)
    with file_errors(path, always=True):
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_builds(path)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{_WRITE}-{os.getpid()}-", suffix=".tmp")
        _hold(fd)
    try:
        with _build_errors(path, Path(tmp)):
            with os.fdopen(fd, "wb") as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
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
    except (OSError, ValueError) as exc:
        raise DataError(str(path), f"unreadable {what} ({exc})") from exc


# ---- directories ------------------------------------------------------------------------------

_BUILD = "build"
_OLD = "old"
_WRITE = "write"
# A temporary nobody holds is stale only once it is this old: its builder takes the flock a moment
# after creating it, and must not lose it in between.
_UNHELD_GRACE_SECONDS = 30.0


def _scratch_pattern(name: str, kind: str) -> re.Pattern[str]:
    return re.compile(rf"^\.{re.escape(name)}\.{kind}-(\d+)-")


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def _hold(fd: int) -> None:
    """Mark a temporary as being written by this process (flock on it, dropped when fd closes)."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        pass  # no flock here (some network filesystems): the pid alone then tells


def _held(entry: Path) -> bool:
    """Whether some live process holds the flock its builder took on ``entry``."""
    import fcntl

    try:
        fd = os.open(entry, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return True  # cannot tell: leave it
    finally:
        os.close(fd)
    return False


def _stale(entry: Path, pid: int, locked_kind: bool) -> bool:
    if not _pid_alive(pid):
        return True
    if not locked_kind or _held(entry):
        return False
    try:  # alive pid, nobody holds it: a reused pid, unless the builder has only just made it
        return time.time() - entry.lstat().st_mtime > _UNHELD_GRACE_SECONDS
    except OSError:
        return False


def remove_stale_builds(out: str | Path) -> list[Path]:
    """Remove the ``.NAME.build-PID-*`` directories and ``.NAME.write-PID-*.tmp`` files beside
    ``out`` that no live builder holds (see the module doc); returns them.

    A ``.NAME.old-PID-*`` left by a crash between the two renames of a swap holds the previous
    directory: it is put back when ``out`` is missing, else removed.
    """
    out = Path(out).absolute()
    parent, name = out.parent, out.name
    removed: list[Path] = []
    if not parent.is_dir():
        return removed
    kinds = [(_scratch_pattern(name, kind), kind) for kind in (_BUILD, _OLD, _WRITE)]
    for entry in sorted(parent.iterdir()):
        for pattern, kind in kinds:
            match = pattern.match(entry.name)
            if not match or not _stale(entry, int(match.group(1)), locked_kind=kind != _OLD):
                continue
            if kind == _OLD and not out.exists() and (entry / "previous").is_dir():
                os.rename(entry / "previous", out)
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def swap_directory(tmp: Path, out: Path) -> None:
    """Rename ``tmp`` to ``out``; an existing ``out`` is moved aside first and deleted afterwards.

    A crash between the two renames leaves the previous directory intact in
    ``.NAME.old-PID-*/previous`` (put back by the next ``remove_stale_builds``).
    """
    tmp, out = Path(tmp), Path(out)
    if not out.exists():
        os.rename(tmp, out)
        fsync_dir(out.parent)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.{_OLD}-{os.getpid()}-", dir=out.parent))
    os.rename(out, old / "previous")  # same filesystem: atomic
    try:
        os.rename(tmp, out)
    except BaseException:
        os.rename(old / "previous", out)
        raise
    fsync_dir(out.parent)
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def atomic_directory(out: str | Path, check: Callable[[Path], None] | None = None) -> Iterator[Path]:
    """Yield a fresh temporary sibling of ``out`` to fill; on success it replaces ``out``.

    ``check(out)`` runs before the build starts and again just before the swap (e.g. to refuse to
    replace a directory that is not of the expected kind). Stale builds of the same name left by
    killed processes are removed first.
    """
    out = Path(out).absolute()
    if check is not None:
        check(out)
    with file_errors(out, always=True):
        out.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_builds(out)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.{_BUILD}-{os.getpid()}-", dir=out.parent))
        held = os.open(tmp, os.O_RDONLY)  # the flock that tells a live build from a stale one
        _hold(held)
    try:
        # A fault while the build writes is reported against ``out``: the temporary is gone after.
        with _build_errors(out, tmp):
            os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private; the result need not be
            yield tmp
            fsync_tree(tmp)
            if check is not None:
                check(out)
            swap_directory(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        os.close(held)


@contextmanager
def _build_errors(out: Path, tmp: Path) -> Iterator[None]:
    try:
        yield
    except FileError:
        raise
    except OSError as exc:
        name = str(exc.filename or "")
        inside = name.startswith(str(tmp))
        where = f" (writing {Path(name).relative_to(tmp)})" if inside and name != str(tmp) else ""
        raise FileError(os_error_message(out if inside or not name else name, exc) + where) from exc


# ---- JSONL ------------------------------------------------------------------------------------


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
                    problem = f"invalid JSON ({exc})"
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


# ---- locks ------------------------------------------------------------------------------------


class LockedError(DynragError):
    """Another process holds the lock."""


class DirectoryLock:
    """An exclusive lock on ``DIR/.lock`` (fcntl.flock), held until ``release`` or process exit.

    The OS drops the lock when the holder dies (kill -9 included), so a stale lock file never
    blocks. The file records the holder's pid for the error message of the next would-be holder.
    """

    def __init__(self, directory: str | Path, what: str = "directory"):
        self.directory = Path(directory)
        self.path = self.directory / ".lock"
        self.what = what
        self._fd: int | None = None

    def acquire(self) -> "DirectoryLock":
        import fcntl

        with file_errors(self.directory):
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise LockedError(
                f"{self.directory}: another process (pid {holder}) is using this {self.what}; "
                "wait for it to finish or stop it"
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        except OSError:
            pass  # a full disk: the lock holds all the same, only the pid is not recorded
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> "DirectoryLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
