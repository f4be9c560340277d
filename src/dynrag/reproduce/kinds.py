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

from pydantic import BaseModel, ConfigDict
from rich.console import Console

from dynrag.errors import ConfigError
from dynrag.reproduce.catalog import OWN_LOOP_TABLES, TABLES, table_names
from dynrag.reproduce.retrieval_tables import RETRIEVAL_TABLES
from dynrag.registry import parse_pairs, split_csv_pairs
from dynrag.run.jobs import JOBS, JobTraits


class ReproduceArgs(BaseModel):
    """The `reproduce` command line, typed once; every kind reads its part of it."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    table: str
    limit: int | None = None
    model: str = "bundled"
    retriever: str | None = None
    retriever_option: list[str] = []
    corpus: str = "contexts"
    data: list[str] = []
    data_dir: Path | None = None
    world: Path | None = None
    dataset: list[str] = []
    row: list[str] = []
    option: list[str] = []
    out: Path = Path("runs/reproduce")
    write: Path | None = None
    run: bool = True
    progress: bool = True
    reader: list[str] = []
    tuned: list[Path] = []
    batch: int = 1
    workers: str = "1"
    results: Path | None = None
    skip_bad: bool = False

    def given(self) -> list[str]:
        """The fields set to something other than their default, in declaration order."""
        from dynrag.lm.spec import ModelSpec

        named = []
        for name, field in type(self).model_fields.items():
            value, default = getattr(self, name), field.get_default(call_default_factory=True)
            if name == "model":  # `bundled` and `bundled:qwen2.5-0.5b` are one model
                changed = ModelSpec.parse(value) != ModelSpec.parse(default)
            else:
                changed = value != default
            if changed and name != "table":
                named.append(name)
        return named

    def data_files(self) -> dict[str, Path]:
        return {k: Path(v) for k, v in parse_pairs(self.data, flag="--data").items()}

    def options(self) -> dict[str, str]:
        return parse_pairs(self.option, flag="--option")

    def retriever_options(self) -> dict[str, str]:
        """--retriever-option pairs, several to a flag allowed (url=...,index=...), as `eval` reads them."""
        return parse_pairs(split_csv_pairs(self.retriever_option), flag="--retriever-option")

    def worker_count(self) -> int | str:
        return int(self.workers) if self.workers.strip().isdigit() else self.workers.strip()


def flag_of(field: str) -> str:
    return "--no-run" if field == "run" else "--" + field.replace("_", "-")


# What every kind reads: where its runs and its page go, and whether progress shows.
ALWAYS = frozenset({"out", "write", "progress"})


@dataclass(frozen=True)
class ReproduceKind:
    """One kind of reproduce job. ``reads``: the fields of `ReproduceArgs` it uses beyond ``ALWAYS``;
    ``owns``: whether a table name is of this kind; ``run``: the job, returning the markdown page."""

    name: str
    owns: Callable[[str], bool]
    reads: frozenset[str]
    reads_sentence: str  # the one-line refusal's explanation of what the kind reads
    run: Callable[[ReproduceArgs, Console], str]
    # The job holds no directory itself: each row's (or cell's) run holds its own.
    traits: JobTraits = JobTraits(lock="none", loop="own")

    def check(self, args: ReproduceArgs) -> None:
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


def _progress(args: ReproduceArgs, console: Console) -> bool:
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


def _request(args: ReproduceArgs, **extra: Any):
    from dynrag.reproduce.runs import ReproduceRequest

    return ReproduceRequest(table=args.table, options=args.options(), limit=args.limit, model=args.model,
                            data=args.data_files(), data_dir=args.data_dir, out=args.out,
                            datasets=list(args.dataset) or None, rows=list(args.row) or None, run=args.run, **extra)


def _run_qa(args: ReproduceArgs, err: Console) -> str:
    from dynrag.reproduce.provenance import load_average
    from dynrag.reproduce.record_build import table_record
    from dynrag.reproduce.render import render_lines
    from dynrag.reproduce.runs import reproduce

    req = _request(args, retriever=args.retriever, retriever_options=args.retriever_options(), corpus=args.corpus,
                   batch=args.batch, world=args.world, tuned=list(args.tuned), workers=args.worker_count(),
                   skip_bad=args.skip_bad)
    started, load_start = time.monotonic(), load_average()
    report = reproduce(req, console=err, progress=_progress(args, err))
    lines = render_lines(report)
    if args.results is not None:
        write_record(args.results, table_record(report, lines, _context(started, load_start)), err)
    return "\n".join(lines) + "\n"


def _run_retrieval(args: ReproduceArgs, err: Console) -> str:
    from dynrag.reproduce.provenance import load_average
    from dynrag.reproduce.record_build import retrieval_record
    from dynrag.reproduce.retrieval_render import plot_sweep, render_retrieval
    from dynrag.reproduce.retrieval_runs import reproduce_retrieval
    req = _request(args)
    spec = RETRIEVAL_TABLES.open(args.table, req.options)
    started, load_start = time.monotonic(), load_average()
    report = reproduce_retrieval(spec, req, console=err, progress=_progress(args, err))
    text = render_retrieval(report)
    if args.results is not None:
        write_record(args.results, retrieval_record(report, _context(started, load_start)), err)
    picture = args.write.with_suffix(".png") if args.write is not None else Path(args.out) / "retrieval" / args.table / f"{args.table}.png"
    if plot_sweep(report, picture):
        text += f"\nPlot: {picture}\n"
    return text


def _run_reader_figure(args: ReproduceArgs, err: Console) -> str:
    from dynrag.reproduce.bestpractice_figure3 import figure3_command

    return figure3_command(dataset=list(args.dataset), data=list(args.data), readers=parse_pairs(args.reader, flag="--reader"),
                           model=args.model, limit=args.limit, out=args.out, run=args.run, console=err,
                           progress=_progress(args, err), options=args.options())


def _run_grpo_figure(args: ReproduceArgs, err: Console) -> str:
    from dynrag.reproduce.deeprag_figure3 import figure3_command

    return figure3_command(world=args.world, model=args.model, limit=args.limit, out=args.out, run=args.run,
                           console=err, progress=_progress(args, err), options=args.options())


def _run_classifier_table(args: ReproduceArgs, err: Console) -> str:
    from dynrag.reproduce.bestpractice_table1 import table1_command

    return table1_command(data_dir=args.data_dir, data=args.data_files(), world=args.world, limit=args.limit,
                          out=args.out, console=err, progress=_progress(args, err))


def _in_tables(name: str) -> bool:
    return name in TABLES.names()


def _in_retrieval_tables(name: str) -> bool:
    return name in RETRIEVAL_TABLES.names()


def _named(*names: str) -> Callable[[str], bool]:
    return lambda table: table in names


KINDS: tuple[ReproduceKind, ...] = (
    ReproduceKind("qa", _in_tables, frozenset(ReproduceArgs.model_fields) - {"table", "reader"},
                  "answers through eval runs; only `reproduce bestpractice-figure3` reads trained readers", _run_qa,
                  JobTraits(lock="none", loop="eval")),
    ReproduceKind("retrieval", _in_retrieval_tables,
                  frozenset({"limit", "model", "data", "data_dir", "dataset", "row", "option", "run", "results"}),
                  "names each row's retriever and corpus (pool more passages with --option distractors=FILE), so it "
                  "reads only --data, --data-dir, --dataset, --row, --option, --limit, --model, --results and --no-run",
                  _run_retrieval),
    ReproduceKind("reader-figure", _named(*OWN_LOOP_TABLES["reader-figure"]),
                  frozenset({"dataset", "data", "reader", "model", "limit", "run", "option"}),
                  "reads the readers trained by `dynrag train reader` (--reader) over the base --model, and only "
                  "--data, --dataset, --limit, --option and --no-run besides", _run_reader_figure),
    ReproduceKind("grpo-figure", _named(*OWN_LOOP_TABLES["grpo-figure"]),
                  frozenset({"world", "model", "limit", "option", "run"}),
                  "trains GRPO on --world's train split from --model (the stage-I checkpoint) and checks its dev "
                  "split; it reads only --world, --model, --limit (dev questions, default 50), --option and --no-run",
                  _run_grpo_figure),
    ReproduceKind("classifier-table", _named(*OWN_LOOP_TABLES["classifier-table"]),
                  frozenset({"data", "data_dir", "world", "limit"}),
                  "reads only --data, --data-dir, --world, --limit, --out and --write", _run_classifier_table),
)


# Each kind is a job of the registry.
for _kind in KINDS:
    JOBS.add(f"reproduce {_kind.name}", _kind.run, ReproduceArgs, summary=_kind.reads_sentence, traits=_kind.traits)


def kind_of(table: str) -> ReproduceKind:
    for kind in KINDS:
        if kind.owns(table):
            return kind
    raise ConfigError(f"unknown table {table!r}; choose one of: {', '.join(table_names())}")


def run_reproduce(args: ReproduceArgs, err: Console) -> str:
    """Check the flags against the table's kind, run it, write the page if asked; the page."""
    from dynrag.io.files import atomic_write_text

    kind = kind_of(args.table)
    kind.check(args)
    text = JOBS.open(f"reproduce {kind.name}", args, err)
    if args.write is not None:
        atomic_write_text(args.write, text)
    return text
