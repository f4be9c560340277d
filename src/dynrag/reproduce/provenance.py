"""Where a result came from: the code's commit, the machine and its load, a file's sha256, the date.
Each helper answers None where it cannot tell (no git, no repository), never fails a finished run."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path

# The package's own directory: the commit is that of the code that ran, not of the working directory.
PACKAGE_DIR = Path(__file__).resolve().parents[1]


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):  # no git on PATH, or it hung
        return None


def git_commit(cwd: Path = PACKAGE_DIR) -> str | None:
    """``git rev-parse HEAD`` of the repository holding ``cwd``; None outside one or without git."""
    done = _git(["rev-parse", "HEAD"], cwd)
    return done.stdout.strip() if done is not None and done.returncode == 0 and done.stdout.strip() else None


def is_ancestor(commit: str, cwd: Path) -> bool | None:
    """Whether ``commit`` is in the history of HEAD (``git merge-base --is-ancestor``); None when
    git cannot say (no git, not a repository). An unknown commit is not in the history."""
    if git_commit(cwd) is None:
        return None
    done = _git(["merge-base", "--is-ancestor", commit, "HEAD"], cwd)
    return None if done is None else done.returncode == 0


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:  # not every platform has one
        return None


def load_text(start: float | None, end: float | None) -> str | None:
    """The machine's one-minute load at the start and the end of a run, as the records write it."""
    known = [f"{x:.1f}" for x in (start, end) if x is not None]
    return "-".join(known) or None


def machine() -> str:
    """"2-core x86_64, 8 GB": what the seconds of a record were measured on."""
    try:
        memory = f", {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GB"
    except (ValueError, OSError, AttributeError):
        memory = ""
    return f"{os.cpu_count()}-core {platform.machine()}{memory}"


def today() -> str:
    """The date in UTC, as records and the lab notebook write it."""
    return datetime.now(timezone.utc).date().isoformat()
