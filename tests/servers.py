"""Real server processes for integration tests: started on a free loopback port, waited for, and
stopped (with their log shown when they fail to come up)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]


def _own_session_dying_with_parent() -> None:
    """In the child: its own process group (so it can be stopped whole), and SIGTERM when the
    process that started it dies, so a killed test run or benchmark leaves no server behind."""
    os.setsid()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """`with ServerProcess(argv, ready_url) as proc:` runs argv until the block ends."""

    def __init__(self, argv: list[str], ready_url: str, log: Path, env: dict | None = None, wait: float = 600.0):
        self.argv, self.ready_url, self.log, self.wait = argv, ready_url, log, wait
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "ServerProcess":
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log, "wb")
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT, env=self.env,
                                     cwd=REPO, preexec_fn=_own_session_dying_with_parent)
        deadline = time.monotonic() + self.wait
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.argv[:4]} exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                if httpx.get(self.ready_url, timeout=2).status_code < 500:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.__exit__()
        raise RuntimeError(f"{self.argv[:4]} not ready at {self.ready_url} after {self.wait} s:\n{self.tail()}")

    def tail(self, chars: int = 4000) -> str:
        self._log.flush()
        return self.log.read_text(errors="replace")[-chars:]

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()


def dynrag_serve(port: int, log: Path, *args: str, env: dict | None = None) -> ServerProcess:
    argv = [sys.executable, "-m", "dynrag.cli", "serve", "--port", str(port), *args]
    return ServerProcess(argv, f"http://127.0.0.1:{port}/health", log, env=env)


def artifacts_dir() -> Path:
    """Where tests leave files for people to look at (screenshots): $DYNRAG_TEST_ARTIFACTS or
    test-artifacts/ in the repository (ignored by git)."""
    out = Path(os.environ.get("DYNRAG_TEST_ARTIFACTS") or REPO / "test-artifacts")
    out.mkdir(parents=True, exist_ok=True)
    return out
