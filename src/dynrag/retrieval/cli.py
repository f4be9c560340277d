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
        hyde: bool = typer.Option(
            False, "--hyde/--no-hyde", help="Search with each question plus a hypothetical passage the model writes."
        ),
        model: str = typer.Option("bundled", "--model", help="HyDE's model: bundled | bundled:NAME | hf:PATH_OR_ID"),
        hyde_cache: Optional[Path] = typer.Option(
            None, "--hyde-cache",
            help="JSONL of HyDE passages, reused when model and prompt match and extended with new ones "
            "(default OUT/hyde.jsonl); share one file across runs to write each passage once.",
        ),
        hyde_max_new_tokens: int = typer.Option(64, "--hyde-max-new-tokens", help="Length cap of a HyDE passage."),
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
            if not hyde and (hyde_cache is not None or model != "bundled"):
                raise ConfigError("--hyde-cache and --model apply to HyDE: add --hyde")
            if hyde_max_new_tokens < 1:
                raise ConfigError(f"--hyde-max-new-tokens must be >= 1, got {hyde_max_new_tokens}")
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
            passages = None
            if hyde:
                from dynrag.lm import load_lm
                from dynrag.retrieval.hyde_cache import HydePassages

                passages = HydePassages(load_lm(model, progress=show), hyde_cache or out / "hyde.jsonl",
                                        hyde_max_new_tokens)
                # Write every passage before searching, so queries_per_second is search alone
                # whether the passages were written now or read back.
                questions = [ex.question for ex in examples if ex.supporting]
                written = _write_passages(passages, questions, show)
            ret = open_retriever(retriever, index_dir, options, work_dir=out, progress=show)
            try:
                result = evaluate_retrieval(
                    ret, examples, ks, progress=show, query_transform=passages.expand if passages else None
                )
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
                "query_transform": "hyde" if passages else "none",
            }
            if passages is not None:
                meta.update(hyde_summary(passages, questions, written, result.summary))
            path = write_outputs(out, result, meta)
            summary = json.loads(path.read_text(encoding="utf-8"))
            Console().print(summary_table(summary, ks))
            err.print(f"wrote {path}")



def _write_passages(passages, questions: list[str], progress: bool) -> int:
    """Have a passage for every question; returns how many the model wrote now."""
    from tqdm import tqdm

    before = passages.generated
    for question in tqdm(questions, desc="HyDE passages", unit=" q", disable=not progress):
        passages.passage(question)
    return passages.generated - before


def hyde_summary(passages, questions: list[str], written: int, summary: dict) -> dict:
    """What HyDE cost: passages written now or reused, and queries/s counting the model's writing
    time (as recorded when each passage was written, so a reused file reports the same figure)."""
    generation = passages.generation_seconds(questions)
    return {
        "hyde_model": passages.lm.name,
        "hyde_max_new_tokens": passages.max_new_tokens,
        "hyde_cache": str(Path(passages.path).resolve()) if passages.path else None,
        "hyde_generated": written,
        "hyde_reused": len(questions) - written,
        "hyde_generation_seconds": generation,
        "queries_per_second_with_generation": summary["n"] / (summary["search_seconds"] + generation),
    }


def summary_table(summary: dict, ks: list[int]) -> Table:
    """One row per metric (a wide row of columns wraps its headers in a narrow terminal)."""
    opts = ", ".join(f"{k}={v}" for k, v in summary.get("options", {}).items())
    hyde = " + HyDE" if summary.get("query_transform") == "hyde" else ""
    title = f"{summary['retriever']}" + (f" ({opts})" if opts else "") + hyde + f" on {summary['dataset']}"
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("n", str(summary["n"]))
    for name in [f"recall@{k}" for k in ks] + [f"support_all@{k}" for k in ks] + ["mrr"]:
        table.add_row(name, f"{summary[name]:.3f}")
    table.add_row("queries_per_second", f"{summary['queries_per_second']:.1f}")
    if "queries_per_second_with_generation" in summary:
        table.add_row("queries_per_second_with_generation", f"{summary['queries_per_second_with_generation']:.2f}")
    return table
