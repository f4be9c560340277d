"""Progress for the long commands (synth, train): a bar with a rate and an ETA on a terminal, and
a plain line at most every few seconds otherwise (a log file of a background job)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

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


@contextmanager
def progress_bar(description: str, total: int, completed: int, console: Console, enabled: bool = True,
                 unit: str = "items") -> Iterator[Bar]:
    """A live bar when `enabled` and the console is a terminal; plain lines when enabled without
    one; silent when not enabled."""
    bar = Bar(description, total, completed, console, enabled, unit)
    if enabled and console.is_terminal:
        columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[stats]}"), RateColumn(unit), TimeElapsedColumn(), TimeRemainingColumn())
        with Progress(*columns, console=console) as progress:
            bar._progress = progress
            bar._task = progress.add_task(description, total=total, completed=completed, stats="")
            yield bar
        return
    yield bar
