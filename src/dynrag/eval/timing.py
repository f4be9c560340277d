"""What a run took on the wall clock, kept in its directory (``timing.json``) across resumes.

Each question's record already holds its own seconds, but with worker processes or a batch those
overlap, so their sum is not what the run cost. Every session that answers questions (one
command, from the moment it starts: model loading and index building included) keeps one entry,
rewritten atomically after each question it writes, so a session killed with -9 keeps its time
up to its last written question. A run's wall time is the sum of its sessions'.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from dynrag.errors import FileError
from dynrag.io.files import atomic_write_json, read_json

TIMING = "timing.json"
TIMING_FORMAT = "dynrag-timing/1"


def read_sessions(run_dir: Path) -> list[dict[str, Any]]:
    """The sessions recorded in ``run_dir`` ([] for a run made before this file existed)."""
    path = Path(run_dir) / TIMING
    if not path.is_file():
        return []
    data = read_json(path, "run timing")
    return list(data.get("sessions") or []) if isinstance(data, dict) else []


def wall_figures(sessions: list[dict[str, Any]], answered: int) -> dict[str, Any]:
    """The summary's figures: wall seconds in all, and per question when every answered question
    was answered in a timed session (a run partly answered before timing existed gets None)."""
    if not sessions:
        return {"wall_seconds": None, "wall_seconds_per_question": None}
    seconds = sum(float(s["wall_seconds"]) for s in sessions)
    timed = sum(int(s["answered"]) for s in sessions)
    return {"wall_seconds": seconds,
            "wall_seconds_per_question": seconds / timed if timed and timed >= answered else None}


class SessionClock:
    """One answering session's entry in ``timing.json``, started when the session starts."""

    def __init__(self, run_dir: Path, execution: str = "", clock=time.monotonic):
        self.path = Path(run_dir) / TIMING
        self.clock = clock
        self.started = clock()
        self.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.execution = execution
        self.answered = 0
        self.earlier: list[dict[str, Any]] | None = None
        self.failed = False  # timing.json could not be written: the session's time stays as last written

    def tick(self, answered: int = 1) -> None:
        """``answered`` more questions are on disk: record the session's time so far.

        The answers are what a run is for and its time is a measurement of it, so a timing.json
        that cannot be written (a full disk) never stops the run: the session's entry stays as last
        written, it then counts fewer answers than the run holds, and the summary gives no
        per-question wall time. A full disk stops the run at the next answer, naming
        predictions.jsonl."""
        if self.failed:
            return
        if self.earlier is None:
            self.earlier = read_sessions(self.path.parent)
        self.answered += answered
        entry = {"started_at": self.started_at, "wall_seconds": round(self.clock() - self.started, 3),
                 "answered": self.answered, "execution": self.execution}
        try:
            atomic_write_json(self.path, {"format": TIMING_FORMAT, "sessions": [*self.earlier, entry]})
        except FileError:
            self.failed = True


__all__ = ["SessionClock", "TIMING", "read_sessions", "wall_figures"]
