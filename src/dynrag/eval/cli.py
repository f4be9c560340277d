"""The `eval` and `compare` commands; dynrag.cli registers them through ``register``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, ContextManager, Optional

import typer
from rich.console import Console

DATASET_NAMES = "hotpotqa, 2wikimultihopqa, musique, strategyqa, iirc, popqa, jsonl"
RETRIEVER_HELP = "Retriever over the corpus: bm25 | dense | hybrid | milvus (dense parts are built on first use)."


def register(app: typer.Typer, user_errors: Callable[[], ContextManager[None]]) -> None:
    @app.command("eval")
    def eval_command(
        dataset: str = typer.Option(..., "--dataset", help=f"Benchmark format: {DATASET_NAMES}."),
        data: Path = typer.Option(..., "--data", help="The benchmark file in its original format."),
        method: str = typer.Option(..., "--method", help="Answering method (see `dynrag ask --help`)."),
        out: Path = typer.Option(..., "--out", help="Run directory (created, or resumed when it exists)."),
        corpus: Optional[str] = typer.Option(
            None, "--corpus", help="'contexts' (pool the questions' context paragraphs) or an index directory."
        ),
        limit: Optional[int] = typer.Option(None, "--limit", help="Only the first N questions."),
        model: str = typer.Option("bundled", "--model", help="bundled | bundled:NAME | hf:PATH_OR_ID[#FILE.gguf]"),
        option: list[str] = typer.Option([], "--option", help="Method option KEY=VALUE (repeatable)."),
        preset: Optional[str] = typer.Option(
            None, "--preset", help="Retrieval-chain preset of `single`: balanced | best (same as --option preset=NAME)."
        ),
        retriever: Optional[str] = typer.Option(
            None, "--retriever", help=f"{RETRIEVER_HELP} Default: bm25, or hybrid with --option preset=balanced|best."
        ),
        retriever_option: list[str] = typer.Option(
            [], "--retriever-option", help="Retriever option KEY=VALUE (repeatable), as in `dynrag eval-retrieval --option`."
        ),
        exemplars: Optional[str] = typer.Option(
            None, "--exemplars", help="Few-shot exemplar style (default: the dataset's own)."
        ),
        aliases: Optional[Path] = typer.Option(None, "--aliases", help="2WikiMultihopQA answer alias file."),
        skip_bad: bool = typer.Option(False, "--skip-bad", help="Skip and count malformed records."),
        baseline: Optional[Path] = typer.Option(
            None, "--baseline", help="A `direct` run of the same questions: adds knowledge-boundary figures."
        ),
        progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the progress bar."),
    ) -> None:
        """Evaluate a method on a benchmark file into a resumable run directory."""
        with user_errors():
            from dynrag.eval.runner import EvalRequest, run_eval
            from dynrag.eval.rundir import SUMMARY_MD
            from dynrag.methods.registry import parse_option_pairs

            req = EvalRequest(
                dataset=dataset,
                data=data,
                method=method,
                out=out,
                corpus=corpus,
                limit=limit,
                model=model,
                options=parse_option_pairs(option, preset),
                exemplars=exemplars,
                aliases=aliases,
                skip_bad=skip_bad,
                baseline=baseline,
                retriever=retriever,
                retriever_options=list(retriever_option),
            )
            err = Console(stderr=True)
            run_eval(req, console=err, progress=progress and err.is_terminal)
            sys.stdout.write((out / SUMMARY_MD).read_text(encoding="utf-8"))

    @app.command("compare")
    def compare_command(
        runs: list[Path] = typer.Argument(..., help="Run directories written by `dynrag eval`."),
        plot: Optional[Path] = typer.Option(None, "--plot", help="Write F1 against retrievals/question here (PNG)."),
    ) -> None:
        """Print a markdown table of runs; optionally plot F1 against retrievals per question."""
        with user_errors():
            from dynrag.eval.compare import add_direct_boundaries, load_run, markdown_table, plot_runs

            loaded = add_direct_boundaries([load_run(r) for r in runs])
            sys.stdout.write(markdown_table(loaded))
            if plot is not None:
                plot_runs(loaded, plot)
                Console(stderr=True).print(f"wrote {plot}")
