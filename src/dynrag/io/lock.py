"""The run lock: ``DirectoryLock``, an exclusive flock on ``DIR/.lock`` held for a process's life."""

from __future__ import annotations

import os
from pathlib import Path

from dynrag.errors import DynragError
from dynrag.io.faults import file_errors


class LockedError(DynragError):
    """Another process holds the lock."""


class DirectoryLock:
    """An exclusive lock on ``DIR/.lock`` (fcntl.flock), held until ``release`` or process exit.

    The OS drops the lock when the holder dies (kill -9 included), so a stale lock file never
    blocks. The file records the holder's pid for the error message of the next would-be holder.
    """

    def __init__(self, directory: str | Path, what: str = "directory", wait: bool = False):
        self.directory = Path(directory)
        self.path = self.directory / ".lock"
        self.what = what
        # wait=True: block until the holder is done, for work that a second process should take
        # over finished rather than be refused (a model cache written once).
        self.wait = wait
        self._fd: int | None = None

    def acquire(self) -> "DirectoryLock":
        import fcntl

        with file_errors(self.directory):
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if self.wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
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
