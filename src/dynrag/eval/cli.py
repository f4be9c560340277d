"""The `eval`, `eval-retrieval` and `compare` commands; dynrag.cli registers them through ``register``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable, ContextManager, Optional

import typer
from rich.console import Console
from rich.text import Text

from dynrag.eval.datasets import DATASETS
from dynrag.methods.registry import METHODS
from dynrag.retrieval.factory import RETRIEVERS, option_help

DATASET_NAMES = DATASETS.choices(", ")
CONFIG_HELP = "A run configuration (YAML, see docs/evaluation.md); flags given here override its keys."
RETRIEVER_HELP = f"Retriever over the corpus: {RETRIEVERS.choices()} (dense parts are built on first use)."


def register(app: typer.Typer, user_errors: Callable[[], ContextManager[None]]) -> None:
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
            [], "--retriever-option", metavar="KEY=VALUE", help="Retriever option KEY=VALUE (repeatable), as in `dynrag eval-retrieval --option`."
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
            from dynrag.config import eval_request, load_run_config
            from dynrag.eval.runner import run_eval
            from dynrag.eval.rundir import SUMMARY_MD

            flags = dict(dataset=dataset, data=data, method=method, out=out, corpus=corpus, limit=limit, model=model,
                         exemplars=exemplars, aliases=aliases, skip_bad=skip_bad, baseline=baseline, retriever=retriever,
                         scorer=scorer, workers=workers, dask=dask)
            pairs = ([f"preset={preset}"] if preset else []) + list(option)  # --option preset=... wins
            req = eval_request(load_run_config(config, flags, pairs, retriever_option))
            req.concurrency = concurrency
            err = Console(stderr=True, emoji=False)
            run_eval(req, console=err, progress=progress and err.is_terminal)
            sys.stdout.write((req.out / SUMMARY_MD).read_text(encoding="utf-8"))

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
        option: list[str] = typer.Option(
            [], "--option", metavar="KEY=VALUE",
            help=f"Retriever option KEY=VALUE (repeatable), defaults in brackets. {option_help()}",
        ),
        k: Optional[str] = typer.Option(None, "--k", metavar="K,K", help="Cut-offs for recall@K and support_all@K (default 3,10)."),
        limit: Optional[int] = typer.Option(None, "--limit", metavar="N", help="Only the first N questions."),
        skip_bad: Optional[bool] = typer.Option(None, "--skip-bad/--no-skip-bad", help="Skip and count malformed records."),
        progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress bars."),
        hyde: Optional[bool] = typer.Option(
            None, "--hyde/--no-hyde", help="Search with each question plus a hypothetical passage the model writes."
        ),
        model: Optional[str] = typer.Option(None, "--model", metavar="SPEC", help="HyDE's model: bundled | bundled:NAME | hf:PATH_OR_ID"),
        hyde_cache: Optional[Path] = typer.Option(
            None, "--hyde-cache", metavar="FILE",
            help="JSONL of HyDE passages, reused when model and prompt match and extended with new ones "
            "(default OUT/hyde.jsonl); share one file across runs to write each passage once.",
        ),
        hyde_max_new_tokens: Optional[int] = typer.Option(
            None, "--hyde-max-new-tokens", metavar="N", help="Length cap of a HyDE passage (default 64)."
        ),
    ) -> None:
        """Measure retrieval alone: recall@K, support_all@K, MRR and queries/s on a benchmark's
        gold supporting passages."""
        with user_errors():
            from dynrag.config import load_run_config, require
            from dynrag.errors import ConfigError
            from dynrag.eval.retrieval import (
                evaluate_retrieval,
                hyde_summary,
                summary_table,
                write_hyde_passages,
                write_outputs,
            )
            from dynrag.eval.rundir import CONFIG, RETRIEVAL_RUN_FORMAT, check_run_dir, lock_run
            from dynrag.eval.steps import check_corpus, corpus_index, load_questions
            from dynrag.io.files import atomic_write_json
            from dynrag.lm.loader import check_model_spec
            from dynrag.retrieval.base import close_retriever
            from dynrag.retrieval.factory import given_options, needs_index, open_retriever

            if hyde is not True and (hyde_cache is not None or model is not None):
                raise ConfigError("--hyde-cache and --model apply to HyDE: add --hyde")
            flags = dict(dataset=dataset, data=data, out=out, retriever=retriever, corpus=corpus, k=k, limit=limit,
                         skip_bad=skip_bad, hyde=hyde, model=model, hyde_cache=hyde_cache,
                         hyde_max_new_tokens=hyde_max_new_tokens)
            run = load_run_config(config, flags, retriever_pairs=option, retriever_flag="--option")
            require(run, "dataset", "data", "out")
            retriever = run.retriever or "bm25"
            options = given_options(retriever, run.retriever_options)
            server = not needs_index(retriever)  # the server's index is the corpus
            if server and run.corpus:
                raise ConfigError(f"--corpus: retriever {retriever!r} searches its server's index; drop --corpus")
            dataset, data, out, ks = run.dataset, run.data, run.out, run.k
            corpus = None if server else run.corpus or "contexts"
            if corpus is not None:
                check_corpus(corpus)  # a bad --corpus fails before the questions are read
            check_run_dir(out, "eval-retrieval")
            if run.hyde:
                check_model_spec(run.model)
            err = Console(stderr=True, emoji=False)
            show = progress and err.is_terminal
            examples, _ = load_questions(dataset, data, err, skip_bad=run.skip_bad, limit=run.limit)
            with lock_run(out):
                # The directory records its kind first, so no other command mistakes it for its own.
                atomic_write_json(out / CONFIG, {
                    "format": RETRIEVAL_RUN_FORMAT, "retriever": retriever, "options": options,
                    "dataset": dataset, "data": str(Path(data).resolve()), "corpus": corpus, "k": ks,
                    "limit": run.limit, "hyde": run.hyde,
                })
                index_dir = corpus_index(corpus, out, examples, err, show) if corpus is not None else None
                passages = None
                if run.hyde:
                    from dynrag.lm import load_lm
                    from dynrag.retrieval.hyde_cache import HydePassages

                    passages = HydePassages(load_lm(run.model, progress=show), run.hyde_cache or out / "hyde.jsonl",
                                            run.hyde_max_new_tokens)
                    # Write every passage before searching, so queries_per_second is search alone
                    # whether the passages were written now or read back.
                    questions = [ex.question for ex in examples if ex.supporting]
                    written = write_hyde_passages(passages, questions, show)
                ret = open_retriever(retriever, index_dir, options, work_dir=out, progress=show)
                try:
                    result = evaluate_retrieval(
                        ret, examples, ks, progress=show, query_transform=passages.expand if passages else None
                    )
                finally:
                    close_retriever(ret)
                meta = {
                    "retriever": retriever,
                    "options": options,
                    "dataset": dataset,
                    "data": str(Path(data).resolve()),
                    "corpus": corpus if corpus in ("contexts", None) else str(index_dir.resolve()),
                    "index": str(index_dir.resolve()) if index_dir is not None else None,
                    "k": ks,
                    "query_transform": "hyde" if passages else "none",
                }
                if passages is not None:
                    meta.update(hyde_summary(passages, questions, written, result.summary))
                path = write_outputs(out, result, meta)
                summary = json.loads(path.read_text(encoding="utf-8"))
                Console().print(summary_table(summary, ks))
                err.print(Text(f"wrote {path}"), soft_wrap=True)

    @app.command("compare")
    def compare_command(
        runs: list[Path] = typer.Argument(..., metavar="RUN_DIR...", help="Run directories written by `dynrag eval`."),
        plot: Optional[Path] = typer.Option(None, "--plot", metavar="FILE", help="Write F1 against retrievals/question here (PNG)."),
    ) -> None:
        """Print a markdown table of runs; optionally plot F1 against retrievals per question."""
        with user_errors():
            from dynrag.eval.compare import add_direct_boundaries, load_run, markdown_table, plot_runs

            loaded = add_direct_boundaries([load_run(r) for r in runs])
            sys.stdout.write(markdown_table(loaded))
            if plot is not None:
                plot_runs(loaded, plot)
                Console(stderr=True).print(Text(f"wrote {plot}"), soft_wrap=True)
