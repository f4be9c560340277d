"""Run a dynrag command in a subprocess and kill it with SIGKILL once a condition holds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]


def dynrag_env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_dynrag(args: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dynrag.cli", *args], env=dynrag_env(), capture_output=True,
                          text=True, timeout=timeout)


def kill_when(args: list[str], ready: Callable[[], bool], timeout: float = 300) -> str:
    """Start `dynrag ARGS`, SIGKILL it as soon as `ready()`; returns its stderr so far.

    Fails if the command ends on its own first: the test must interrupt real work.
    """
    proc = subprocess.Popen([sys.executable, "-m", "dynrag.cli", *args], env=dynrag_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"finished before it could be killed (rc {proc.returncode}): {proc.stderr.read()[-2000:]}")
            if ready():
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(30)
                assert proc.returncode == -signal.SIGKILL
                return proc.stderr.read()
            time.sleep(0.02)
        raise AssertionError("the condition never held")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
