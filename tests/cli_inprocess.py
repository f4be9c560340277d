"""dynrag's command line run inside the test process, answering like ``python -m dynrag.cli``.

Starting an interpreter costs about half a second of CPU before dynrag says a word; a test of what
a command prints for a bad input needs no process of its own. ``run_in_process`` returns what
``subprocess.run(..., capture_output=True, text=True)`` would: the exit code, stdout and stderr,
and for an exception that escaped the command, the interpreter's traceback on stderr with exit
code 1 (so a test that a failure is one line, without a traceback, still sees one if it happens).
Tests that need a real process (kill -9, a mount, a terminal, inherited environment) keep
starting one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path

from typer.testing import CliRunner


@contextmanager
def _working_directory(cwd: str | Path | None):
    if cwd is None:
        yield
        return
    before = os.getcwd()
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(before)


def run_in_process(*args: object, cwd: str | Path | None = None, env: Mapping[str, str] | None = None,
               input: str | None = None) -> subprocess.CompletedProcess:
    """``dynrag ARGS`` in this process; ``env`` adds to (does not replace) the environment."""
    from dynrag.cli import app

    argv = [str(a) for a in args]
    with _working_directory(cwd):
        result = CliRunner().invoke(app, argv, env=dict(env or {}), input=input, catch_exceptions=True)
    stderr = result.stderr
    code = result.exit_code
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        exc = result.exception
        stderr += "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        code = 1
    return subprocess.CompletedProcess([sys.executable, "-m", "dynrag.cli", *argv], code, result.stdout, stderr)
