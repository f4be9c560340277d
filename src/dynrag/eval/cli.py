"""The `eval`, `eval-retrieval` and `compare` commands; dynrag.cli registers them through ``register``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, ContextManager, Optional

import typer
from rich.console import Console
from rich.text import Text

from dynrag.retrieval.factory import option_help
from dynrag.retrieval.transform_registry import QUERY_TRANSFORMS, writes_text as transform_writes
from dynrag.run.flags import (
    aliases_flag, batch_flag, config_flag, corpus_flag, data_flag, dataset_flag, exemplars_flag, limit_flag, shard_flag,
    method_flag, method_option_flag, model_flag, preset_flag, progress_flag, retriever_flag, retriever_option_flag,
    old_spelling, renamed, skip_bad_flag, workers_flag,
)

UserErrors = Callable[[], ContextManager[None]]


def register(app: typer.Typer, user_errors: UserErrors) -> None:
    register_eval(app, user_errors)
    register_eval_retrieval(app, user_errors)
    register_compare(app, user_errors)


def register_eval(app: typer.Typer, user_errors: UserErrors) -> None:
    @app.command("eval")
    def eval_command(
        config: Optional[Path] = config_flag(),
        dataset: Optional[str] = dataset_flag(),
        data: Optional[Path] = data_flag(),
        method: Optional[str] = method_flag(),
        out: Optional[Path] = typer.Option(None, "--out", metavar="DIR", help="Run directory (created, or resumed when it exists)."),
        corpus: Optional[str] = corpus_flag(),
        limit: Optional[int] = limit_flag(),
        shard: Optional[str] = shard_flag(),
        model: Optional[str] = model_flag(),
        option: list[str] = method_option_flag(),
        preset: Optional[str] = preset_flag(),
        retriever: Optional[str] = retriever_flag(role="Retriever over the corpus (default bm25, or hybrid with --preset balanced|best)"),
        retriever_option: list[str] = retriever_option_flag(),
        exemplars: Optional[str] = exemplars_flag(role="Few-shot exemplar style (default: the dataset's own)"),
        aliases: Optional[Path] = aliases_flag(),
        skip_bad: Optional[bool] = skip_bad_flag(None),
        baseline: Optional[Path] = typer.Option(
            None, "--baseline", metavar="DIR", help="A `direct` run of the same questions: adds knowledge-boundary figures."
        ),
        scorer: Optional[str] = typer.Option(
            None, "--scorer", metavar="NAME", help="How answers are scored: squad (default) | dragin (DRAGIN's evaluation; docs/methods.md)."
        ),
        progress: bool = progress_flag(),
        concurrency: int = typer.Option(
            1, "--concurrency", metavar="N", help="Questions in flight at once, for a model behind an HTTP server (--model openai:...)."
        ),
        batch: Optional[int] = batch_flag(),
        workers: Optional[str] = workers_flag(
            role="Local worker processes answering questions (default auto, for an in-process model on the CPU)"
        ),
        dask: Optional[str] = typer.Option(
            None, "--dask", metavar="ADDRESS", help="Answer on a Dask cluster: its scheduler's address, e.g. tcp://HOST:8786 "
            "(workers need the index on a shared path, or a search-server retriever).",
        ),
    ) -> None:
        """Evaluate a method on a benchmark file into a resumable run directory."""
        with user_errors():
            from dynrag.config import load_run_config
            from dynrag.eval import runner  # noqa: F401  (registers the `eval` job)
            from dynrag.eval.summary import summary_markdown
            from dynrag.run.jobs import JOBS

            flags = dict(dataset=dataset, data=data, method=method, out=out, corpus=corpus, limit=limit, shard=shard, model=model,
                         exemplars=exemplars, aliases=aliases, skip_bad=skip_bad, baseline=baseline, retriever=retriever,
                         scorer=scorer, workers=workers, dask=dask, concurrency=concurrency if concurrency != 1 else None,
                         batch=batch)
            pairs = ([f"preset={preset}"] if preset else []) + list(option)  # --option preset=... wins
            err = Console(stderr=True, emoji=False)
            summary = JOBS.open("eval", load_run_config(config, flags, pairs, retriever_option), console=err,
                                progress=progress and err.is_terminal)
            sys.stdout.write(summary_markdown(summary))


def register_eval_retrieval(app: typer.Typer, user_errors: UserErrors) -> None:
    @app.command("eval-retrieval")
    def eval_retrieval_command(
        config: Optional[Path] = config_flag(),
        dataset: Optional[str] = dataset_flag(),
        data: Optional[Path] = data_flag(),
        out: Optional[Path] = typer.Option(None, "--out", metavar="DIR", help="Output directory: summary.json, rankings.jsonl."),
        retriever: Optional[str] = retriever_flag(),
        corpus: Optional[str] = corpus_flag(role="Corpus (contexts are pooled into OUT/contexts-index)"),
        retriever_option: list[str] = retriever_option_flag(
            role=f"Retriever option (defaults in brackets; {option_help().rstrip('.')})"
        ),
        option: list[str] = typer.Option(
            [], "--option", metavar="KEY=VALUE", hidden=True, help="Deprecated name of --retriever-option.",
        ),
        cutoffs: Optional[str] = typer.Option(None, "--cutoffs", metavar="K,K", help="Cut-offs for recall@K and support_all@K (default 3,10)."),
        k: Optional[str] = old_spelling("--k", metavar="K,K"),  # elsewhere --k is passages per retrieval
        limit: Optional[int] = limit_flag(),
        skip_bad: Optional[bool] = skip_bad_flag(None),
        progress: bool = progress_flag(),
        query_transform: Optional[str] = typer.Option(
            None, "--query-transform", metavar="NAME",
            help=f"What is searched instead of the question: {QUERY_TRANSFORMS.choices(', ')} (default none; "
            "docs/evaluation.md). hyde: question + a hypothetical passage the model writes; hyde-only: the passage; "
            "hyde-multi: question + N passages; rewrite: a search query the model writes; decompose: 1-3 "
            "sub-questions, each searched, rankings fused.",
        ),
        hyde: Optional[bool] = typer.Option(
            None, "--hyde/--no-hyde", help="Same as --query-transform hyde."
        ),
        model: Optional[str] = model_flag(role="The query transform's model"),
        hyde_cache: Optional[Path] = typer.Option(
            None, "--hyde-cache", metavar="FILE",
            help="JSONL of the texts the query transform had the model write, reused when model, settings and "
            "prompt match and extended with new ones (default OUT/hyde.jsonl, or OUT/query-texts.jsonl for "
            "rewrite and decompose); share one file across runs to write each text once.",
        ),
        hyde_max_new_tokens: Optional[int] = typer.Option(
            None, "--hyde-max-new-tokens", metavar="N", help="Length cap of a HyDE passage (default 64)."
        ),
        hyde_documents: Optional[int] = typer.Option(
            None, "--hyde-documents", metavar="N",
            help="hyde-multi: passages after the question (default 3): the greedy one, then sampled ones.",
        ),
    ) -> None:
        """Measure retrieval alone: recall@K, support_all@K, MRR and queries/s on a benchmark's
        gold supporting passages."""
        with user_errors():
            from dynrag.config import load_run_config, warn_deprecated
            from dynrag.errors import ConfigError
            from dynrag.eval.retrieval import summary_table
            from dynrag.eval import retrieval_run  # noqa: F401  (registers the `eval-retrieval` job)
            from dynrag.run.jobs import JOBS

            writes_text = hyde is True or transform_writes(query_transform) or config is not None
            if not writes_text and (hyde_cache is not None or model is not None):
                raise ConfigError("--hyde-cache and --model apply to a query transform: add --hyde or --query-transform NAME")
            if option:
                warn_deprecated("eval-retrieval --option is now --retriever-option")
            flags = dict(dataset=dataset, data=data, out=out, retriever=retriever, corpus=corpus,
                         cutoffs=renamed(cutoffs, k, "--cutoffs", "--k"), limit=limit,
                         skip_bad=skip_bad, query_transform=query_transform, hyde=hyde, model=model,
                         hyde_cache=hyde_cache, hyde_max_new_tokens=hyde_max_new_tokens, hyde_documents=hyde_documents)
            run = load_run_config(config, flags, retriever_pairs=list(retriever_option) + list(option),
                                  retriever_flag="--retriever-option" if retriever_option or not option else "--option")
            err = Console(stderr=True, emoji=False)
            summary = JOBS.open("eval-retrieval", run, console=err, progress=progress and err.is_terminal)
            Console().print(summary_table(summary, list(run.cutoffs)))
            err.print(Text(f"wrote {Path(run.out) / 'summary.json'}"), soft_wrap=True)


def register_compare(app: typer.Typer, user_errors: UserErrors) -> None:
    @app.command("compare")
    def compare_command(
        runs: list[Path] = typer.Argument(..., metavar="RUN_DIR...", help="Run directories written by `dynrag eval`."),
        plot: Optional[Path] = typer.Option(None, "--plot", metavar="FILE", help="Write F1 against retrievals/question here (PNG)."),
        claims: bool = typer.Option(False, "--claims", help="Also decide the papers' pairwise claims among the runs (DRAGIN above each other method, FLARE above single) on the questions both answered: exact McNemar on EM, n, p and verdict."),
    ) -> None:
        """Print a markdown table of runs; optionally plot F1 against retrievals per question."""
        with user_errors():
            from dynrag.eval.compare import add_direct_boundaries, load_run, markdown_table, plot_runs

            loaded = add_direct_boundaries([load_run(r) for r in runs])
            sys.stdout.write(markdown_table(loaded))
            if claims:
                from dynrag.eval.compare import labels
                from dynrag.eval.compare_claims import claim_lines, decide_pairs

                sys.stdout.write(claim_lines(decide_pairs(loaded, labels(loaded))))
            if plot is not None:
                plot_runs(loaded, plot)
                Console(stderr=True).print(Text(f"wrote {plot}"), soft_wrap=True)
