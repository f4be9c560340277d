"""The result record of one benchmark script's run (its ``--record DIR``): the headline figures it
printed, with the provenance a script does not gather itself — the code's commit, the command line,
the machine and its load at the start and the end, the wall time, the date, the model and its
sha256 — so a systems figure on the results page comes from a run, not from a copy typed out of
the lab notebook."""

from __future__ import annotations

import math
import shlex
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dynrag.errors import DynragError
from dynrag.io.files import file_sha256
from dynrag.reproduce.provenance import git_commit, load_average, load_text, machine, today
from dynrag.reproduce.records import Figure, Provenance, ResultRecord, write_record
from dynrag.reproduce.runs import slug

PREFIX = "systems."

# A figure as a script writes it: a Figure, or (name, value, unit) or (name, value, unit, note).
FigureLike = Figure | tuple


@dataclass(frozen=True)
class Started:
    """When a benchmark began and the machine's load then: taken first thing in its ``main``, so
    the record's wall time and load span the whole measurement."""

    perf: float
    load: float | None

    @classmethod
    def now(cls) -> Started:
        return cls(time.perf_counter(), load_average())


def systems_id(*parts: str) -> str:
    """``systems.PART.PART``, each part made safe for a file name (a rerun of the same setting
    replaces its record; another setting gets its own)."""
    return PREFIX + ".".join(slug(str(p).replace(",", "_")) for p in parts if str(p))


def as_figures(figures: Iterable[FigureLike]) -> list[Figure]:
    """The figures as records hold them. One whose value is not finite (a fit over too few sizes)
    is left out: NaN is not JSON, and a blank is better than a number that means nothing."""
    out = []
    for f in figures:
        if not isinstance(f, Figure):
            f = Figure(**dict(zip(("name", "value", "unit", "note"), f)))
        if math.isfinite(f.value):
            out.append(f)
    return out


def command_line(argv: Sequence[str]) -> str:
    """The command as it could be typed again from the repository root: the interpreter relative
    to the working directory when it lies inside it (``.venv/bin/python``), else ``python``."""
    try:
        python = str(Path(sys.executable).relative_to(Path.cwd()))
    except ValueError:
        python = "python"
    return shlex.join([python, *argv])


def _model_provenance(models: Sequence[str]) -> tuple[str | None, str | None]:
    """The model specs as resolved (``bundled`` names its default) and the bundled ones' recorded
    sha256, joined by ", " in order ("-" for a model whose weights are not hashed). A spec this
    version cannot parse is kept as typed: a finished benchmark must not fail on its record."""
    from dynrag.lm.spec import ModelSpec
    from dynrag.reproduce.record_build import model_sha256

    names, sums = [], []
    for model in models:
        try:
            spec = ModelSpec.parse(model).resolved()
            names.append(str(spec))
            sums.append(model_sha256(spec))
        except DynragError:
            names.append(model)
            sums.append(None)
    if not names:
        return None, None
    return ", ".join(names), (", ".join(s or "-" for s in sums) if any(sums) else None)


def systems_record(record_id: str, title: str, figures: Iterable[FigureLike], *, started: Started,
                   argv: Sequence[str] | None = None, models: Sequence[str] = (), data: Sequence[str | Path] = (),
                   corpus: str | None = None, datasets: Sequence[str] = ()) -> ResultRecord:
    """A ``kind: "systems"`` record of ``figures``; ``argv`` defaults to ``sys.argv`` (its script
    names the record's ``table``), ``data`` are files whose sha256 the record keeps (small ones:
    question files, a corpus of thousands of passages, not millions)."""
    argv = list(sys.argv if argv is None else argv)
    model, model_sha = _model_provenance(models)
    data_names = ", ".join(str(d) for d in data) or None
    data_sha = ", ".join(file_sha256(d) for d in data) or None
    record_id = record_id if record_id.startswith(PREFIX) else PREFIX + record_id
    return ResultRecord(
        id=record_id, kind="systems", table=Path(argv[0]).stem if argv else "unknown", title=title,
        reader=model if len(models) == 1 else None, datasets=list(datasets), corpus=corpus,
        figures=as_figures(figures),
        provenance=Provenance(commit=git_commit(), command=command_line(argv), model=model, model_sha256=model_sha,
                              data=data_names, data_sha256=data_sha, corpus=corpus,
                              load=load_text(started.load, load_average()), machine=machine(),
                              wall_s=round(time.perf_counter() - started.perf, 1), date=today()),
    )


def write_systems_record(directory: str | Path, record_id: str, title: str, figures: Iterable[FigureLike], *,
                         started: Started, **provenance) -> Path | None:
    """Build the record (``systems_record``'s arguments) and write it as ``DIRECTORY/<id>.json``;
    None, and no file, when there is no figure to keep (every part failed or was skipped). Says
    on stderr where it went, so the printed results stay the script's own."""
    record = systems_record(record_id, title, figures, started=started, **provenance)
    if not record.figures:
        print(f"no figures measured: no record written to {directory}", file=sys.stderr)
        return None
    path = write_record(directory, record)
    print(f"record: {path}", file=sys.stderr)
    return path
