"""The kinds of `dynrag reproduce` job, as a registry: what each reads of the command line, and how it
runs. A table belongs to one kind: the QA tables and `world` answer through eval runs, the
retrieval tables through eval-retrieval runs, and three figures and tables answer in their own loops
(training readers, GRPO, a classifier). Which flags a kind takes is its entry's trait, so the
command has no branch on a table's name, and a flag a kind does not read is refused in one line
instead of being ignored.
"""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from dynrag.errors import ConfigError
from dynrag.reproduce.catalog import OWN_LOOP_TABLES, TABLES, table_names
from dynrag.reproduce.retrieval_tables import RETRIEVAL_TABLES
from dynrag.reproduce.runs import ReproduceRequest, flag_of
from dynrag.run.jobs import JOBS, JobTraits


# What every kind reads: where its runs and its page go, and whether progress shows.
ALWAYS = frozenset({"out", "write", "progress"})


@dataclass(frozen=True)
class ReproduceKind:
    """One kind of reproduce job. ``reads``: the fields of `ReproduceRequest` it uses beyond ``ALWAYS``;
    ``owns``: whether a table name is of this kind; ``run``: the job, returning the markdown page."""

    name: str
    owns: Callable[[str], bool]
    reads: frozenset[str]
    reads_sentence: str  # the one-line refusal's explanation of what the kind reads
    run: Callable[[ReproduceRequest, Console], str]
    # The job holds no directory itself: each row's (or cell's) run holds its own.
    traits: JobTraits = JobTraits(lock="none", loop="own")

    def check(self, args: ReproduceRequest) -> None:
        """Refuse, in one line, every flag given that this kind would not read."""
        unread = [f for f in args.given() if f not in self.reads | ALWAYS]
        if "results" in unread:
            raise ConfigError(f"--results: {args.table} writes no result record yet; the QA tables, the retrieval "
                              "tables and `reproduce world` do")
        if "workers" in unread:
            raise ConfigError(f"--workers: {args.table} does not answer through eval runs, so it has no workers to "
                              "give; the QA tables and `reproduce world` take it")
        if unread:
            raise ConfigError(f"{args.table} {self.reads_sentence}; drop {', '.join(sorted(map(flag_of, unread)))}")


def _progress(args: ReproduceRequest, console: Console) -> bool:
    return args.progress and console.is_terminal


def _context(started: float, load_start: str | None):
    from dynrag.reproduce.provenance import load_average
    from dynrag.reproduce.record_build import RunContext

    return RunContext(shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]), time.monotonic() - started, load_start,
                      load_average())


def write_record(directory: Path, record: Any, err: Console) -> None:
    """Write a run's result record into ``directory`` (`--results`), unless no row has a result."""
    from dynrag.reproduce.records import write_record as write

    if record.rows:
        err.print(f"Result record: {write(directory, record)}", highlight=False)
    else:  # a record of nothing would only hide the table's published cells on the page
        err.print("[yellow]--results: no row has a result yet; no record written[/yellow]")


def _run_qa(args: ReproduceRequest, err: Console) -> str:
    from dynrag.reproduce.carried_rows import carry_rows
    from dynrag.reproduce.provenance import load_average
    from dynrag.reproduce.record_build import table_record
    from dynrag.reproduce.render import render_lines
    from dynrag.reproduce.runs import reproduce
    from dynrag.reproduce.shards import join_shards

    started, load_start = time.monotonic(), load_average()
    report = reproduce(args, console=err, progress=_progress(args, err))
    if not args.run:  # a row run in shards is joined; a row whose run directory is gone is the record's
        notes = join_shards(report, args.results)
        if args.results is not None:
            notes += carry_rows(report, args.results)
        for note in notes:
            err.print(f"[yellow]{note}[/yellow]", highlight=False)
    lines = render_lines(report)
    if args.results is not None:
        write_record(args.results, table_record(report, lines, _context(started, load_start)), err)
    return "\n".join(lines) + "\n"


def _run_retrieval(args: ReproduceRequest, err: Console) -> str:
    from dynrag.reproduce.provenance import load_average
    from dynrag.reproduce.record_build import retrieval_record
    from dynrag.reproduce.retrieval_render import plot_sweep, render_retrieval
    from dynrag.reproduce.retrieval_runs import reproduce_retrieval

    spec = RETRIEVAL_TABLES.open(args.table, args.options)
    started, load_start = time.monotonic(), load_average()
    report = reproduce_retrieval(spec, args, console=err, progress=_progress(args, err))
    text = render_retrieval(report)
    if args.results is not None:
        write_record(args.results, retrieval_record(report, _context(started, load_start)), err)
    picture = args.write.with_suffix(".png") if args.write is not None else Path(args.out) / "retrieval" / args.table / f"{args.table}.png"
    if plot_sweep(report, picture):
        text += f"\nPlot: {picture}\n"
    return text


def _run_reader_figure(args: ReproduceRequest, err: Console) -> str:
    from dynrag.reproduce.bestpractice_figure3 import figure3_command

    return figure3_command(dataset=list(args.datasets or []), data=[str(path) for path in args.data.values()],
                           readers=dict(args.readers), model=args.model, limit=args.limit, out=args.out, run=args.run,
                           console=err, progress=_progress(args, err), options=dict(args.options))


def _run_grpo_figure(args: ReproduceRequest, err: Console) -> str:
    from dynrag.reproduce.deeprag_figure3 import figure3_command

    return figure3_command(world=args.world, model=args.model, limit=args.limit, out=args.out, run=args.run,
                           console=err, progress=_progress(args, err), options=dict(args.options))


def _run_classifier_table(args: ReproduceRequest, err: Console) -> str:
    from dynrag.reproduce.bestpractice_table1 import table1_command

    return table1_command(data_dir=args.data_dir, data=dict(args.data), world=args.world, limit=args.limit,
                          out=args.out, console=err, progress=_progress(args, err))


def _in_tables(name: str) -> bool:
    return name in TABLES.names()


def _in_retrieval_tables(name: str) -> bool:
    return name in RETRIEVAL_TABLES.names()


def _named(*names: str) -> Callable[[str], bool]:
    return lambda table: table in names


KINDS: tuple[ReproduceKind, ...] = (
    ReproduceKind("qa", _in_tables, frozenset(ReproduceRequest.model_fields) - {"table", "readers"},
                  "answers through eval runs; only `reproduce bestpractice-figure3` reads trained readers", _run_qa,
                  JobTraits(lock="none", loop="eval")),
    ReproduceKind("retrieval", _in_retrieval_tables,
                  frozenset({"limit", "model", "data", "data_dir", "datasets", "rows", "options", "run", "results"}),
                  "names each row's retriever and corpus (pool more passages with --option distractors=FILE), so it "
                  "reads only --data, --data-dir, --dataset, --row, --option, --limit, --model, --results and --no-run",
                  _run_retrieval),
    ReproduceKind("reader-figure", _named(*OWN_LOOP_TABLES["reader-figure"]),
                  frozenset({"datasets", "data", "readers", "model", "limit", "run", "options"}),
                  "reads the readers trained by `dynrag train reader` (--reader) over the base --model, and only "
                  "--data, --dataset, --limit, --option and --no-run besides", _run_reader_figure),
    ReproduceKind("grpo-figure", _named(*OWN_LOOP_TABLES["grpo-figure"]),
                  frozenset({"world", "model", "limit", "options", "run"}),
                  "trains GRPO on --world's train split from --model (the stage-I checkpoint) and checks its dev "
                  "split; it reads only --world, --model, --limit (dev questions, default 50), --option and --no-run",
                  _run_grpo_figure),
    ReproduceKind("classifier-table", _named(*OWN_LOOP_TABLES["classifier-table"]),
                  frozenset({"data", "data_dir", "world", "limit"}),
                  "reads only --data, --data-dir, --world, --limit, --out and --write", _run_classifier_table),
)


# Each kind is a job of the registry.
for _kind in KINDS:
    JOBS.add(f"reproduce {_kind.name}", _kind.run, ReproduceRequest, summary=_kind.reads_sentence, traits=_kind.traits)


def kind_of(table: str) -> ReproduceKind:
    for kind in KINDS:
        if kind.owns(table):
            return kind
    raise ConfigError(f"unknown table {table!r}; choose one of: {', '.join(table_names())}")


def run_reproduce(args: ReproduceRequest, err: Console) -> str:
    """Check the flags against the table's kind, run it, write the page if asked; the page."""
    from dynrag.io.files import atomic_write_text

    kind = kind_of(args.table)
    kind.check(args)
    text = JOBS.open(f"reproduce {kind.name}", args, err)
    if args.write is not None:
        atomic_write_text(args.write, text)
    return text
