"""Run a dynrag command in a subprocess and kill it with SIGKILL once a condition holds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from tests import waiting
from tests.waiting import HANG_GUARD_S

REPO = Path(__file__).resolve().parents[2]


def dynrag_env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_dynrag(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dynrag.cli", *args], env=dynrag_env(), capture_output=True,
                          text=True, timeout=HANG_GUARD_S)


def kill_when(args: list[str], ready: Callable[[], bool], what: str = "the state the test waits for") -> str:
    """Start `dynrag ARGS`, SIGKILL it as soon as `ready()`; returns its stderr so far.

    Fails if the command ends on its own first: the test must interrupt real work. Its stderr goes
    to a file, so a chatty command never blocks on a full pipe before it gets there.
    """
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-m", "dynrag.cli", *args], env=dynrag_env(),
                                stdout=subprocess.DEVNULL, stderr=err, text=True)
        try:
            waiting.kill_when(proc, ready, what)
        except AssertionError as exc:
            err.seek(0)
            raise AssertionError(f"{exc}\n{err.read()[-2000:]}") from None
        assert proc.returncode == -signal.SIGKILL
        err.seek(0)
        return err.read()
