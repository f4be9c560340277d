"""The `eval-retrieval` command; dynrag.cli registers it through ``register``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, ContextManager, Optional

import typer
from rich.console import Console
from rich.table import Table

DATASET_NAMES = "hotpotqa, 2wikimultihopqa, musique, strategyqa, iirc, popqa, jsonl"


def register(app: typer.Typer, user_errors: Callable[[], ContextManager[None]]) -> None:
    @app.command("eval-retrieval")
    def eval_retrieval_command(
        dataset: str = typer.Option(..., "--dataset", help=f"Benchmark format: {DATASET_NAMES}."),
        data: Path = typer.Option(..., "--data", help="The benchmark file in its original format."),
        out: Path = typer.Option(..., "--out", help="Output directory: summary.json, rankings.jsonl."),
        retriever: str = typer.Option("bm25", "--retriever", help="bm25 | dense | hybrid | milvus"),
        corpus: str = typer.Option(
            "contexts", "--corpus",
            help="'contexts' (pool the questions' context paragraphs into OUT/contexts-index) or an index directory.",
        ),
        option: list[str] = typer.Option(
            [], "--option",
            help="Retriever option KEY=VALUE (repeatable). bm25: backend (auto|numpy|numba). dense: embedding_model, "
            "batch_size, backend (auto|numpy|faiss). hybrid: alpha (0.3), fusion (minmax|rrf), candidates (50), "
            "embedding_model, batch_size, bm25_backend, dense_backend. milvus: mode (hybrid|bm25|dense), "
            "ranker (rrf|weighted), alpha, candidates, uri, collection, embedding_model, batch_size.",
        ),
        k: str = typer.Option("3,10", "--k", help="Cut-offs for recall@K and support_all@K, e.g. 3,10."),
        limit: Optional[int] = typer.Option(None, "--limit", help="Only the first N questions."),
        skip_bad: bool = typer.Option(False, "--skip-bad", help="Skip and count malformed records."),
        progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress bars."),
    ) -> None:
        """Measure retrieval alone: recall@K, support_all@K, MRR and queries/s on a benchmark's
        gold supporting passages."""
        with user_errors():
            from dynrag.errors import ConfigError, DataError
            from dynrag.eval.loaders import LoadReport, load_examples
            from dynrag.retrieval.evaluate import evaluate_retrieval, parse_ks, write_outputs
            from dynrag.retrieval.factory import open_retriever, parse_retriever_options

            ks = parse_ks(k)
            options = parse_retriever_options(retriever, option)
            if limit is not None and limit < 1:
                raise ConfigError(f"--limit must be >= 1, got {limit}")
            err = Console(stderr=True)
            show = progress and err.is_terminal
            report = LoadReport()
            examples = list(load_examples(dataset, data, skip_bad=skip_bad, report=report, limit=limit))
            if report.skipped:
                err.print(f"[yellow]skipped {report.skipped} bad record(s)[/yellow]; first: {report.messages[0]}")
            if not examples:
                raise DataError(str(data), "no questions to evaluate")
            if corpus == "contexts":
                from dynrag.eval.pool import CONTEXTS_INDEX, contexts_index, pool_contexts

                index, built = contexts_index(out, pool_contexts(examples), progress=show)
                index.close()
                index_dir = out / CONTEXTS_INDEX
                err.print(f"{'built' if built else 'reusing'} {index_dir} ({len(index)} passages)")
            else:
                index_dir = Path(corpus)
                if not index_dir.is_dir():
                    raise ConfigError(f"--corpus {corpus}: no such index directory (or use --corpus contexts)")
            ret = open_retriever(retriever, index_dir, options, work_dir=out, progress=show)
            try:
                result = evaluate_retrieval(ret, examples, ks, progress=show)
            finally:
                close = getattr(ret, "close", None)
                if close is not None:
                    close()
            meta = {
                "retriever": retriever,
                "options": options,
                "dataset": dataset,
                "data": str(Path(data).resolve()),
                "corpus": corpus if corpus == "contexts" else str(index_dir.resolve()),
                "index": str(index_dir.resolve()),
                "k": ks,
            }
            path = write_outputs(out, result, meta)
            summary = json.loads(path.read_text(encoding="utf-8"))
            Console().print(summary_table(summary, ks))
            err.print(f"wrote {path}")



def summary_table(summary: dict, ks: list[int]) -> Table:
    """One row per metric (a wide row of columns wraps its headers in a narrow terminal)."""
    opts = ", ".join(f"{k}={v}" for k, v in summary.get("options", {}).items())
    title = f"{summary['retriever']}" + (f" ({opts})" if opts else "") + f" on {summary['dataset']}"
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("n", str(summary["n"]))
    for name in [f"recall@{k}" for k in ks] + [f"support_all@{k}" for k in ks] + ["mrr"]:
        table.add_row(name, f"{summary[name]:.3f}")
    table.add_row("queries_per_second", f"{summary['queries_per_second']:.1f}")
    return table
