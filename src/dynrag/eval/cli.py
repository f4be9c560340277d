"""The `eval`, `eval-retrieval` and `compare` commands; dynrag.cli registers them through ``register``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, ContextManager, Optional

import typer
from rich.console import Console
from rich.text import Text

from dynrag.datasets.formats import DATASETS
from dynrag.methods.registry import METHODS
from dynrag.retrieval.factory import RETRIEVERS, option_help
from dynrag.retrieval.transform_registry import QUERY_TRANSFORMS, writes_text as transform_writes

DATASET_NAMES = DATASETS.choices(", ")
CONFIG_HELP = "A run configuration (YAML, see docs/evaluation.md); flags given here override its keys."
RETRIEVER_HELP = f"Retriever over the corpus: {RETRIEVERS.choices()} (dense parts are built on first use)."


UserErrors = Callable[[], ContextManager[None]]


def register(app: typer.Typer, user_errors: UserErrors) -> None:
    register_eval(app, user_errors)
    register_eval_retrieval(app, user_errors)
    register_compare(app, user_errors)


def register_eval(app: typer.Typer, user_errors: UserErrors) -> None:
    @app.command("eval")
    def eval_command(
        config: Optional[Path] = typer.Option(None, "--config", metavar="FILE", help=CONFIG_HELP),
        dataset: Optional[str] = typer.Option(None, "--dataset", metavar="NAME", help=f"Benchmark format: {DATASET_NAMES}."),
        data: Optional[Path] = typer.Option(None, "--data", metavar="FILE", help="The benchmark file in its original format."),
        method: Optional[str] = typer.Option(None, "--method", metavar="NAME", help=f"Answering method: {METHODS.choices()}."),
        out: Optional[Path] = typer.Option(None, "--out", metavar="DIR", help="Run directory (created, or resumed when it exists)."),
        corpus: Optional[str] = typer.Option(
            None, "--corpus", metavar="contexts|DIR", help="'contexts' (pool the questions' context paragraphs) or an index directory."
        ),
        limit: Optional[int] = typer.Option(None, "--limit", metavar="N", help="Only the first N questions."),
        model: Optional[str] = typer.Option(None, "--model", metavar="SPEC", help="bundled | bundled:NAME | hf:PATH_OR_ID[#FILE.gguf] | openai:BASE_URL#MODEL"),
        option: list[str] = typer.Option([], "--option", metavar="KEY=VALUE", help="Method option KEY=VALUE (repeatable)."),
        preset: Optional[str] = typer.Option(
            None, "--preset", metavar="NAME", help="Retrieval-chain preset: balanced | best (same as --option preset=NAME)."
        ),
        retriever: Optional[str] = typer.Option(
            None, "--retriever", metavar="NAME", help=f"{RETRIEVER_HELP} Default: bm25, or hybrid with --option preset=balanced|best."
        ),
        retriever_option: list[str] = typer.Option(
            [], "--retriever-option", metavar="KEY=VALUE", help="Retriever option KEY=VALUE (repeatable), as in `dynrag ask`."
        ),
        exemplars: Optional[str] = typer.Option(
            None, "--exemplars", metavar="STYLE", help="Few-shot exemplar style (default: the dataset's own)."
        ),
        aliases: Optional[Path] = typer.Option(None, "--aliases", metavar="FILE", help="2WikiMultihopQA answer alias file."),
        skip_bad: Optional[bool] = typer.Option(None, "--skip-bad/--no-skip-bad", help="Skip and count malformed records."),
        baseline: Optional[Path] = typer.Option(
            None, "--baseline", metavar="DIR", help="A `direct` run of the same questions: adds knowledge-boundary figures."
        ),
        scorer: Optional[str] = typer.Option(
            None, "--scorer", metavar="NAME", help="How answers are scored: squad (default) | dragin (DRAGIN's evaluation; docs/methods.md)."
        ),
        progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the progress bar."),
        concurrency: int = typer.Option(
            1, "--concurrency", metavar="N", help="Questions in flight at once, for a model behind an HTTP server (--model openai:...)."
        ),
        batch: Optional[int] = typer.Option(
            None, "--batch", metavar="N",
            help="Questions in flight in this process, their generations decoded together by one local model "
            "(one forward pass a token for all of them). Not part of the run's identity.",
        ),
        workers: Optional[str] = typer.Option(
            None, "--workers", metavar="N|auto",
            help="Local worker processes answering questions, each with its own model: N or auto (the default: "
            "one per core for an in-process model on the CPU). Not part of the run's identity: resume with any value.",
        ),
        dask: Optional[str] = typer.Option(
            None, "--dask", metavar="ADDRESS", help="Answer on a Dask cluster: its scheduler's address, e.g. tcp://HOST:8786 "
            "(workers need the index on a shared path, or a search-server retriever).",
        ),
    ) -> None:
        """Evaluate a method on a benchmark file into a resumable run directory."""
        with user_errors():
            from dynrag.config import load_run_config
            from dynrag.eval.runner import run_eval
            from dynrag.eval.summary import summary_markdown
            from dynrag.run.plan import make_plan

            flags = dict(dataset=dataset, data=data, method=method, out=out, corpus=corpus, limit=limit, model=model,
                         exemplars=exemplars, aliases=aliases, skip_bad=skip_bad, baseline=baseline, retriever=retriever,
                         scorer=scorer, workers=workers, dask=dask, concurrency=concurrency if concurrency != 1 else None,
                         batch=batch)
            pairs = ([f"preset={preset}"] if preset else []) + list(option)  # --option preset=... wins
            plan = make_plan(load_run_config(config, flags, pairs, retriever_option), command="eval")
            err = Console(stderr=True, emoji=False)
            summary = run_eval(plan, console=err, progress=progress and err.is_terminal)
            sys.stdout.write(summary_markdown(summary))


def register_eval_retrieval(app: typer.Typer, user_errors: UserErrors) -> None:
    @app.command("eval-retrieval")
    def eval_retrieval_command(
        config: Optional[Path] = typer.Option(None, "--config", metavar="FILE", help=CONFIG_HELP),
        dataset: Optional[str] = typer.Option(None, "--dataset", metavar="NAME", help=f"Benchmark format: {DATASET_NAMES}."),
        data: Optional[Path] = typer.Option(None, "--data", metavar="FILE", help="The benchmark file in its original format."),
        out: Optional[Path] = typer.Option(None, "--out", metavar="DIR", help="Output directory: summary.json, rankings.jsonl."),
        retriever: Optional[str] = typer.Option(None, "--retriever", metavar="NAME", help=f"{RETRIEVERS.choices()} (default bm25)"),
        corpus: Optional[str] = typer.Option(
            None, "--corpus", metavar="contexts|DIR",
            help="'contexts' (the default: pool the questions' context paragraphs into OUT/contexts-index) "
            "or an index directory.",
        ),
        retriever_option: list[str] = typer.Option(
            [], "--retriever-option", metavar="KEY=VALUE",
            help=f"Retriever option KEY=VALUE (repeatable), defaults in brackets. {option_help()}",
        ),
        option: list[str] = typer.Option(
            [], "--option", metavar="KEY=VALUE", hidden=True, help="Deprecated name of --retriever-option.",
        ),
        k: Optional[str] = typer.Option(None, "--k", metavar="K,K", help="Cut-offs for recall@K and support_all@K (default 3,10)."),
        limit: Optional[int] = typer.Option(None, "--limit", metavar="N", help="Only the first N questions."),
        skip_bad: Optional[bool] = typer.Option(None, "--skip-bad/--no-skip-bad", help="Skip and count malformed records."),
        progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress bars."),
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
        model: Optional[str] = typer.Option(
            None, "--model", metavar="SPEC", help="The query transform's model: bundled | bundled:NAME | hf:PATH_OR_ID"
        ),
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
            from dynrag.eval.retrieval_run import run_retrieval_eval
            from dynrag.run.plan import make_plan

            writes_text = hyde is True or transform_writes(query_transform) or config is not None
            if not writes_text and (hyde_cache is not None or model is not None):
                raise ConfigError("--hyde-cache and --model apply to a query transform: add --hyde or --query-transform NAME")
            if option:
                warn_deprecated("eval-retrieval --option is now --retriever-option")
            flags = dict(dataset=dataset, data=data, out=out, retriever=retriever, corpus=corpus, cutoffs=k, limit=limit,
                         skip_bad=skip_bad, query_transform=query_transform, hyde=hyde, model=model,
                         hyde_cache=hyde_cache, hyde_max_new_tokens=hyde_max_new_tokens, hyde_documents=hyde_documents)
            run = load_run_config(config, flags, retriever_pairs=list(retriever_option) + list(option),
                                  retriever_flag="--retriever-option" if retriever_option or not option else "--option")
            plan = make_plan(run, command="eval-retrieval")
            err = Console(stderr=True, emoji=False)
            summary = run_retrieval_eval(plan, err, progress and err.is_terminal)
            Console().print(summary_table(summary, list(run.cutoffs)))
            err.print(Text(f"wrote {plan.out / 'summary.json'}"), soft_wrap=True)


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
