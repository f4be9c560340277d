"""Real server processes for integration tests: started on a free loopback port, waited for, and
stopped (with their log shown when they fail to come up); and `dynrag serve`'s app served in the
test process, for the fast tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

import httpx

from tests.waiting import wait_for

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

    def __init__(self, argv: list[str], ready_url: str, log: Path, env: dict | None = None,
                 missing: str | None = None):
        self.argv, self.ready_url, self.log = argv, ready_url, log
        self.env = {**os.environ, **(env or {})}
        self.missing = missing  # what to say when the program is not there: what installs it
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "ServerProcess":
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log, "wb")
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT, env=self.env,
                                     cwd=REPO, preexec_fn=_own_session_dying_with_parent)
        try:
            wait_for(self._ready_or_exited, f"{self.argv[:4]} to answer at {self.ready_url}", poll_s=0.25,
                     last=lambda: self.tail(1000))
        except AssertionError:
            self.__exit__()
            raise
        if self.proc.poll() is not None:
            raise RuntimeError(self.why_it_exited())
        return self

    def _ready_or_exited(self) -> bool:
        if self.proc.poll() is not None:
            return True
        try:
            return httpx.get(self.ready_url, timeout=10).status_code < 500
        except httpx.HTTPError:
            return False

    def why_it_exited(self) -> str:
        """One line first (what is missing, or the port that is taken, and what to do), then the log."""
        log = self.tail()
        if "address already in use" in log.lower() or "errno 98" in log.lower():
            head = f"{self.argv[:4]} could not bind {self.ready_url}: the port is taken by another process; run the test again"
        elif self.missing and ("No module named" in log or "command not found" in log or "No such file" in log):
            head = f"{self.argv[:4]} cannot start: {self.missing}"
        else:
            head = f"{self.argv[:4]} exited with {self.proc.returncode} before it answered at {self.ready_url}"
        return f"{head}\n{log}"

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


@contextmanager
def serving_in_process(port: int, settings: dict, flags: dict, config: Path | None = None,
                       prepare: Callable[[Any], None] | None = None):
    """`dynrag serve` without a process of its own: the app the command builds
    (``dynrag.serve.cli.build_app`` over the same settings, run flags and ``--config`` file) on
    uvicorn in a thread, on a real loopback port, until the block ends. For fast tests: no
    interpreter to start, no torch to import again. ``settings`` holds ServeSettings fields,
    ``flags`` the run flags (model, index, retriever, exemplars). ``prepare(app)`` runs before the
    first request: a test swaps in a part whose pace it controls there (``app.state.engine``; the
    FastAPI app is the innermost of the guard's wrappers)."""
    import threading

    import uvicorn
    from rich.console import Console

    from dynrag.config import load_run_config
    from dynrag.registry import parse_model
    from dynrag.serve.cli import build_app
    from dynrag.serve.limits import ServeSettings

    serve_settings = parse_model(ServeSettings, {**settings, "port": port}, "dynrag serve")
    run = load_run_config(config, flags)
    app = build_app(serve_settings, run, Console(stderr=True))
    if prepare is not None:
        inner = app
        while not hasattr(inner, "state"):  # the request guard wraps the FastAPI app
            inner = inner.app
        prepare(inner)
    server = uvicorn.Server(uvicorn.Config(app, host=serve_settings.host, port=port, log_level="warning",
                                           timeout_graceful_shutdown=5))
    thread = threading.Thread(target=server.run, name="dynrag-serve-in-process", daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started or not thread.is_alive(), f"the in-process server on port {port} to start")
    except AssertionError:
        server.should_exit = True
        raise
    if not server.started:
        raise RuntimeError(f"the in-process server on port {port} did not start (is the port taken?)")
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(30)
