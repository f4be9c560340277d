"""Progress shown while long work runs: every bar shows a rate and an ETA.

The long commands (synth, train, eval) draw a rich bar on a terminal, and print a plain line at
most every few seconds otherwise (a log file of a background job): ``progress_bar``, whose
columns ``bar_columns`` also gives to a caller that drives its own ``rich.progress.Progress``.
Index builds and retrieval evaluation write a tqdm bar to stderr (``stderr_bar``) and announce long
work with ``notice``; ``duration`` words an estimate ("23 min").
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text


def format_rate(per_second: float | None, unit: str) -> str:
    """Items per hour when slower than one in ten seconds, else per second: "42.0 questions/h"."""
    if not per_second:
        return f"– {unit}/s"
    if per_second < 0.1:
        return f"{per_second * 3600:.1f} {unit}/h"
    return f"{per_second:.2f} {unit}/s"


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class RateColumn(ProgressColumn):
    def __init__(self, unit: str):
        super().__init__()
        self.unit = unit

    def render(self, task) -> Text:
        return Text(format_rate(task.speed, self.unit), style="cyan")


class Bar:
    def __init__(self, description: str, total: int, completed: int, console: Console, enabled: bool, unit: str,
                 every: float = 10.0):
        self.description, self.total, self.completed, self.console, self.unit = description, total, completed, console, unit
        self.enabled, self.every = enabled, every
        self.started, self.start_count, self.last_print = time.monotonic(), completed, 0.0
        self._progress: Progress | None = None

    def rate(self) -> float | None:
        elapsed = time.monotonic() - self.started
        done = self.completed - self.start_count
        return done / elapsed if elapsed > 0 and done > 0 else None

    def eta(self) -> float | None:
        rate = self.rate()
        return (self.total - self.completed) / rate if rate else None

    def advance(self, stats: str = "", n: int = 1) -> None:
        self.completed += n
        if self._progress is not None:
            self._progress.update(self._task, advance=n, stats=stats)
            return
        now = time.monotonic()
        if not self.enabled or (now - self.last_print < self.every and self.completed < self.total):
            return
        self.last_print = now
        self.console.print(
            f"{self.description} {self.completed}/{self.total} {stats}  {format_rate(self.rate(), self.unit)}  "
            f"ETA {format_eta(self.eta())}", highlight=False,
        )


def bar_columns(unit: str) -> tuple[ProgressColumn, ...]:
    """The columns of a rich bar: description, bar, done/total, the task's ``stats`` field, rate,
    elapsed time and ETA."""
    return (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[stats]}"), RateColumn(unit), TimeElapsedColumn(), TimeRemainingColumn())


@contextmanager
def progress_bar(description: str, total: int, completed: int, console: Console, enabled: bool = True,
                 unit: str = "items") -> Iterator[Bar]:
    """A live bar when `enabled` and the console is a terminal; plain lines when enabled without
    one; silent when not enabled."""
    bar = Bar(description, total, completed, console, enabled, unit)
    if enabled and console.is_terminal:
        with Progress(*bar_columns(unit), console=console) as progress:
            bar._progress = progress
            bar._task = progress.add_task(description, total=total, completed=completed, stats="")
            yield bar
        return
    yield bar


def notice(message: str) -> None:
    """One line on stderr about long work about to happen (shown with or without progress bars;
    a bar being drawn is moved below it)."""
    from tqdm import tqdm

    tqdm.write(message, file=sys.stderr)


def stderr_bar(total: int | None, desc: str, enabled: bool, unit: str = " passages") -> Any:
    """The tqdm bar (rate and ETA) on stderr that index builds and retrieval evaluation show."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, file=sys.stderr,
                mininterval=0.5, dynamic_ncols=True)


def duration(seconds: float) -> str:
    """A rough human duration: "40 s", "23 min", "1.5 h"."""
    if seconds != seconds or seconds == float("inf"):
        return "an unknown time"
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"
