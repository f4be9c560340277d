"""The `reproduce` command; dynrag.cli registers it through ``register``."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path
from typing import Callable, ContextManager, Optional

import typer
from rich.console import Console

from dynrag.run.flags import (
    batch_flag, corpus_flag, limit_flag, model_flag, progress_flag, retriever_flag, retriever_option_flag, workers_flag,
)

# Static, so `--help` imports no table module; a test checks it against the registries.
TABLE_HELP = ("dragin-table2 | dragin-table3 | dragin-table4 | dragin-table5 | dragin-table6 | dragin-table7 | deeprag-table1 | deeprag-table2 | deeprag-table3 | deeprag-figure4 | "
              "deeprag-figure3 | deeprag-figure5 | deeprag-figure6 | deeprag-figure7 | deeprag-figure8 | world | world-figure8 | dynamic-family | bestpractice-table1 | bestpractice-table2 | "
              "bestpractice-table3 | bestpractice-table4 | bestpractice-table6 | bestpractice-table7 | "
              "bestpractice-table8 | bestpractice-table9 | bestpractice-table10 | bestpractice-table11 | "
              "bestpractice-figure3")


def _write_record(directory: Path, record, err: Console) -> None:
    """Write a run's result record into ``directory`` (`--results`), unless no row has a result."""
    from dynrag.reproduce.records import write_record

    if record.rows:
        err.print(f"Result record: {write_record(directory, record)}", highlight=False)
    else:  # a record of nothing would only hide the table's published cells on the page
        err.print("[yellow]--results: no row has a result yet; no record written[/yellow]")


def register(app: typer.Typer, user_errors: Callable[[], ContextManager[None]]) -> None:
    @app.command("reproduce")
    def reproduce_command(
        table: str = typer.Argument(..., help=TABLE_HELP),
        limit: Optional[int] = limit_flag(role="Questions of each dataset"),
        model: str = model_flag("bundled"),
        retriever: Optional[str] = retriever_flag(),
        retriever_option: list[str] = retriever_option_flag(),
        corpus: str = corpus_flag("contexts", role="Corpus of each dataset's runs"),
        data: list[str] = typer.Option([], "--data", help="DATASET=FILE (repeatable), e.g. hotpotqa=dev.json."),
        data_dir: Optional[Path] = typer.Option(None, "--data-dir", help="A folder holding each dataset's file at its usual place, e.g. hotpotqa/hotpot_dev_distractor_sample.json (docs/methods.md lists them)."),
        world: Optional[Path] = typer.Option(None, "--world", metavar="DIR", help="`reproduce world`, `world-figure8`, `dynamic-family`, `deeprag-figure3|5|6`: a world directory (dynrag world make --out DIR); its test split, retrieving from its corpus."),
        dataset: list[str] = typer.Option([], "--dataset", help="Only this dataset of the table (repeatable)."),
        row: list[str] = typer.Option([], "--row", help="Only this row, e.g. dragin or fixed_length (repeatable)."),
        option: list[str] = typer.Option([], "--option", help="Table option KEY=VALUE, e.g. paper_model=Llama2-7b-chat."),
        out: Path = typer.Option(Path("runs/reproduce"), "--out", help="Where the run directories go (resumed when they exist)."),
        write: Optional[Path] = typer.Option(None, "--write", help="Also write the markdown table to this file."),
        run: bool = typer.Option(True, "--run/--no-run", help="--no-run: show the published numbers and finished runs only."),
        progress: bool = progress_flag(),
        reader: list[str] = typer.Option([], "--reader", metavar="KEY=DIR", help="bestpractice-figure3: a reader trained by `dynrag train reader` (e.g. gr=ckpt/m_gr; repeatable); the base model is --model."),
        tuned: list[Path] = typer.Option([], "--tuned", metavar="DIR", help="A `dynrag tune` directory: the rows of its method run at its best values (repeatable; the table prints them)."),
        batch: int = batch_flag(1, role="Each run's batch", at_least=1),
        workers: str = workers_flag("1", role="Worker processes of each run (the rows still run one after another)"),
        results: Optional[Path] = typer.Option(None, "--results", metavar="DIR", help="Also write the run's result record (rows, published cells, claim verdicts, provenance) into DIR, e.g. results/; `dynrag results` pages it."),
    ) -> None:
        """Run a paper table's runs with the paper's settings and print ours beside the published numbers."""
        with user_errors():
            from dynrag.errors import ConfigError
            from dynrag.reproduce.runs import ReproduceRequest, reproduce
            from dynrag.reproduce.provenance import load_average
            from dynrag.reproduce.record_build import RunContext, table_record
            from dynrag.reproduce.render import render_lines
            from dynrag.reproduce.catalog import RETRIEVAL_TABLES, TABLES, table_names
            from dynrag.io.files import atomic_write_text
            from dynrag.registry import parse_pairs

            err = Console(stderr=True)
            own_loop = ("bestpractice-figure3", "deeprag-figure3", "bestpractice-table1")  # not eval runs
            if workers.strip() != "1" and (table in own_loop or table in RETRIEVAL_TABLES):
                raise ConfigError(f"--workers: {table} does not answer through eval runs, so it has no workers to "
                                  "give; the QA tables and `reproduce world` take it")
            if results is not None and table in own_loop:
                raise ConfigError(f"--results: {table} writes no result record yet; the QA tables, the retrieval "
                                  "tables and `reproduce world` do")
            if table == "bestpractice-figure3":
                from dynrag.reproduce.bestpractice_figure3 import figure3_command

                text = figure3_command(dataset=list(dataset), data=list(data), readers=parse_pairs(reader, flag="--reader"),
                                       model=model, limit=limit, out=out, run=run, console=err,
                                       progress=progress and err.is_terminal,
                                       options=parse_pairs(option, flag="--option"))
            elif table == "deeprag-figure3":
                from dynrag.reproduce.deeprag_figure3 import figure3_command as grpo_figure

                if reader or tuned or row or dataset or data or data_dir or retriever or retriever_option or corpus != "contexts" or batch != 1:
                    raise ConfigError("deeprag-figure3 trains GRPO on --world's train split from --model (the stage-I "
                                      "checkpoint) and checks its dev split; only --world, --model, --limit (dev "
                                      "questions, default 50), --option, --out, --write and --no-run apply")
                text = grpo_figure(world=world, model=model, limit=limit, out=out, run=run, console=err,
                                   progress=progress and err.is_terminal, options=parse_pairs(option, flag="--option"))
            elif table == "bestpractice-table1":
                from dynrag.lm.spec import ModelSpec
                from dynrag.reproduce.bestpractice_table1 import refuse_flags, table1_command

                refuse_flags({"--reader": reader, "--tuned": tuned, "--row": row, "--dataset": dataset, "--option": option,
                              "--model": ModelSpec.parse(model) != ModelSpec.parse("bundled"), "--retriever": retriever, "--retriever-option": retriever_option,
                              "--corpus": corpus != "contexts", "--batch": batch != 1, "--no-run": not run})
                text = table1_command(data_dir=data_dir, data={k: Path(v) for k, v in parse_pairs(data, flag="--data").items()},
                                      world=world, limit=limit, out=out, console=err, progress=progress and err.is_terminal)
            elif table in RETRIEVAL_TABLES:
                from dynrag.reproduce.retrieval_render import plot_sweep, render_retrieval
                from dynrag.reproduce.retrieval_runs import reproduce_retrieval

                if reader or tuned or retriever or retriever_option or world or corpus != "contexts":
                    raise ConfigError(f"{table}: each row names its retriever and corpus; --reader, --tuned, --retriever, "
                                      "--retriever-option, --world and --corpus do not apply (pool more passages with "
                                      "--option distractors=FILE)")
                req = ReproduceRequest(
                    table=table, options=parse_pairs(option), limit=limit, model=model,
                    data={k: Path(v) for k, v in parse_pairs(data, flag="--data").items()},
                    data_dir=data_dir, out=out, datasets=list(dataset) or None, rows=list(row) or None, run=run,
                )
                spec = RETRIEVAL_TABLES.open(table, req.options)
                started, load_start = time.monotonic(), load_average()
                report = reproduce_retrieval(spec, req, console=err, progress=progress and err.is_terminal)
                text = render_retrieval(report)
                if results is not None:
                    from dynrag.reproduce.record_build import retrieval_record

                    context = RunContext(shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]),
                                         time.monotonic() - started, load_start, load_average())
                    _write_record(results, retrieval_record(report, context), err)
                picture = (write.with_suffix(".png") if write is not None else Path(out) / "retrieval" / table / f"{table}.png")
                if plot_sweep(report, picture):
                    text += f"\nPlot: {picture}\n"
            else:
                if reader:
                    raise ConfigError("--reader: only `reproduce bestpractice-figure3` reads trained readers")
                if table not in TABLES:
                    raise ConfigError(f"unknown table {table!r}; choose one of: {', '.join(table_names())}")
                req = ReproduceRequest(
                    table=table, options=parse_pairs(option), limit=limit, model=model, retriever=retriever,
                    retriever_options=list(retriever_option), corpus=corpus,
                    data={k: Path(v) for k, v in parse_pairs(data, flag="--data").items()},
                    data_dir=data_dir, out=out, datasets=list(dataset) or None, rows=list(row) or None, run=run,
                    batch=batch, world=world, tuned=list(tuned),
                    workers=int(workers) if workers.strip().isdigit() else workers.strip(),
                )
                started, load_start = time.monotonic(), load_average()
                report = reproduce(req, console=err, progress=progress and err.is_terminal)
                lines = render_lines(report)
                text = "\n".join(lines) + "\n"
                if results is not None:
                    context = RunContext(shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]),
                                         time.monotonic() - started, load_start, load_average())
                    _write_record(results, table_record(report, lines, context), err)
            if write is not None:
                atomic_write_text(write, text)
            sys.stdout.write(text)

    @app.command("results")
    def results_command(
        records: Path = typer.Option(Path("results"), "--records", metavar="DIR", help="The result records (dynrag reproduce ... --results DIR)."),
        out: Path = typer.Option(Path("docs/results.md"), "--out", metavar="FILE", help="The page to write."),
        check: bool = typer.Option(False, "--check", help="Write nothing; exit 1 when FILE differs from what would be rendered."),
    ) -> None:
        """Render the results page (docs/results.md) from the result records and the claims ledger."""
        with user_errors():
            from dynrag.errors import DynragError
            from dynrag.reproduce.ledger import load_ledger
            from dynrag.reproduce.records import load_records
            from dynrag.reproduce.results_page import page_inputs, render_page
            from dynrag.io.files import atomic_write_text

            found = load_records(records)
            page = render_page(page_inputs(records, out, load_ledger(), found))
            if check:
                current = out.read_text(encoding="utf-8") if out.is_file() else None
                if current != page:
                    raise DynragError(f"{out} is not what `dynrag results` renders from {records}/; run "
                                      "`dynrag results` and commit the page")
                return
            atomic_write_text(out, page)
            sys.stdout.write(f"{out}: {len(found)} records\n")
