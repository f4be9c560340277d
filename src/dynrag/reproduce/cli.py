"""The `reproduce` command; dynrag.cli registers it through ``register``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, ContextManager, Optional

import typer
from rich.console import Console

from dynrag.reproduce.catalog import table_names
from dynrag.run.flags import (
    batch_flag, corpus_flag, limit_flag, model_flag, shard_flag, progress_flag, retriever_flag, retriever_option_flag, skip_bad_flag,
    workers_flag,
)

# Generated from the table registries (importing them loads no model library: 0.04 s).
TABLE_HELP = " | ".join(table_names())


def _data_files(values: list[str]) -> dict[str, Path]:
    """--data DATASET=FILE pairs; one bare FILE (the reader figure's dev file) is keyed ""."""
    from dynrag.errors import ConfigError
    from dynrag.registry import parse_pairs

    bare = [v for v in values if "=" not in v or Path(v).exists()]
    if len(bare) > 1:
        raise ConfigError(f"--data {bare[1]}: name each file's dataset, DATASET=FILE")
    pairs = parse_pairs([v for v in values if v not in bare], flag="--data")
    return {**{k: Path(v) for k, v in pairs.items()}, **({"": Path(bare[0])} if bare else {})}


def register(app: typer.Typer, user_errors: Callable[[], ContextManager[None]]) -> None:
    @app.command("reproduce")
    def reproduce_command(
        table: str = typer.Argument(..., help=TABLE_HELP),
        limit: Optional[int] = limit_flag(role="Questions of each dataset"),
        shard: Optional[str] = shard_flag(role="Each row's shard"),
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
        skip_bad: bool = skip_bad_flag(),
        results: Optional[Path] = typer.Option(None, "--results", metavar="DIR", help="Also write the run's result record (rows, per-question scores, published cells, claim verdicts, provenance) into DIR, e.g. results/; `dynrag results` pages it. With --no-run, a row whose run directory is gone is carried from the record already there."),
    ) -> None:
        """Run a paper table's runs with the paper's settings and print ours beside the published numbers."""
        with user_errors():
            from dynrag.registry import parse_pairs, split_csv_pairs
            from dynrag.reproduce.kinds import run_reproduce
            from dynrag.reproduce.runs import ReproduceRequest

            # Every KEY=VALUE pair is parsed here, once; the table's kind refuses what it does not read.
            args = ReproduceRequest(
                table=table, limit=limit, shard=shard, model=model, retriever=retriever,
                retriever_options=parse_pairs(split_csv_pairs(retriever_option), flag="--retriever-option"),
                corpus=corpus, data=_data_files(data), data_dir=data_dir, world=world,
                datasets=list(dataset) or None, rows=list(row) or None, options=parse_pairs(option, flag="--option"),
                out=out, write=write, run=run, progress=progress, readers=parse_pairs(reader, flag="--reader"),
                tuned=list(tuned), batch=batch, workers=int(workers) if workers.strip().isdigit() else workers.strip(),
                results=results, skip_bad=skip_bad,
            )
            sys.stdout.write(run_reproduce(args, Console(stderr=True)))

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
