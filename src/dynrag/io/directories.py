"""Atomic directory builds: fill a temporary sibling, fsync it, and swap it into place only when
complete (the old directory is moved aside first and deleted afterwards); and ``check_out_dir``,
which refuses an --out that a command must not write into."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from dynrag.errors import ConfigError
from dynrag.io.faults import build_errors, file_errors
from dynrag.io.files import fsync_dir
from dynrag.io.scratch import BUILD, OLD, hold, new_temp_dir, remove_stale_builds


def check_out_dir(out: str | Path, ours: Callable[[Path], bool], kind: str, where: str | None = None) -> None:
    """Refuse ``out`` when it exists and is not a directory, or holds files and ``ours(out)`` says
    they are not (the remains of) a ``kind``: --out may be a typo, and the command would write
    beside someone's files or over them. A missing or empty directory is fine. ``where`` starts
    the message (default: the path)."""
    out = Path(out)
    where = where or str(out)
    if not out.exists():
        return
    if out.is_file():
        raise ConfigError(f"{where}: is a file, not a directory (choose another --out)")
    if not out.is_dir():
        raise ConfigError(f"{where}: exists and is not a directory (choose another --out)")
    with file_errors(out):
        names = sorted(e.name for e in out.iterdir())
    if names and not ours(out):
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        raise ConfigError(f"{where}: exists and is not a {kind} (it holds {shown}; choose another --out, or empty it)")


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
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.{OLD}-{os.getpid()}-", dir=out.parent))
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
        tmp = new_temp_dir(out.parent, f".{out.name}.{BUILD}-{os.getpid()}-")
        held = os.open(tmp, os.O_RDONLY)  # the flock that tells a live build from a stale one
        hold(held)
    try:
        # A fault while the build writes is reported against ``out``: the temporary is gone after.
        with build_errors(out, tmp):
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
