"""Temporaries left by killed processes: the names of a build's or a write's temporary beside its
target, the flock that marks one as in use, and ``remove_stale_builds``, which clears the stale
ones (a temporary is stale when its process is gone, or when no process holds its flock)."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The kinds of temporary beside a target NAME: .NAME.build-PID-* (a directory being built),
# .NAME.old-PID-* (the previous directory during a swap), .NAME.write-PID-*.tmp (a file being written).
BUILD = "build"
OLD = "old"
WRITE = "write"
# A temporary nobody holds is stale only once it is this old: its builder takes the flock a moment
# after creating it, and must not lose it in between.
_UNHELD_GRACE_SECONDS = 30.0


def new_temp_file(parent: Path, prefix: str, suffix: str = "") -> tuple[int, Path]:
    """A new file ``parent/PREFIX<random>SUFFIX``, open for writing (fd, path).

    Created with mode 0666 for the kernel to apply the umask (and any default ACL), so the file
    renamed into place has the mode a plain open() would give it; mkstemp makes it 0600, and
    reading the umask means setting it (os.umask), process-wide, racing other threads' files."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    return _unique(parent, prefix, suffix, lambda path: os.open(path, flags, 0o666))


def new_temp_dir(parent: Path, prefix: str) -> Path:
    """A new directory ``parent/PREFIX<random>``, mode 0777 less the umask as a plain mkdir
    (``new_temp_file`` says why not mkdtemp)."""
    return _unique(parent, prefix, "", lambda path: os.mkdir(path, 0o777))[1]


def _unique(parent: Path, prefix: str, suffix: str, create: Callable[[Path], Any]) -> tuple[Any, Path]:
    for _ in range(100):
        path = Path(parent) / f"{prefix}{secrets.token_hex(4)}{suffix}"
        try:
            return create(path), path
        except FileExistsError:
            continue
    raise FileExistsError(f"{parent}: no free temporary name {prefix}*{suffix}")


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


def hold(fd: int) -> None:
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
    kinds = [(_scratch_pattern(name, kind), kind) for kind in (BUILD, OLD, WRITE)]
    for entry in sorted(parent.iterdir()):
        for pattern, kind in kinds:
            match = pattern.match(entry.name)
            if not match or not _stale(entry, int(match.group(1)), locked_kind=kind != OLD):
                continue
            if kind == OLD and not out.exists() and (entry / "previous").is_dir():
                os.rename(entry / "previous", out)
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed
