"""`dynrag eval-retrieval` as a run: the questions, the index, HyDE passages if asked for, the
search and the output files of one ``eval-retrieval`` plan (``make_plan(..., command="eval-retrieval")``).
The measuring itself is in ``retrieval.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from dynrag.eval.retrieval import evaluate_retrieval, hyde_summary, write_hyde_passages, write_outputs
from dynrag.io.rundir import CONFIG, RETRIEVAL_RUN_FORMAT, lock_run
from dynrag.eval.steps import load_questions, run_index
from dynrag.io.files import atomic_write_json
from dynrag.run.plan import RunPlan


def retrieval_config(plan: RunPlan) -> dict[str, Any]:
    """config.json of an eval-retrieval directory (its keys are the directory's format)."""
    retriever, data, settings = plan.retriever, plan.dataset, plan.retrieval_eval
    assert retriever is not None and data is not None and settings is not None
    return {
        "format": RETRIEVAL_RUN_FORMAT, "retriever": retriever.name, "options": retriever.options,
        "dataset": data.name, "data": str(data.data), "corpus": retriever.corpus, "k": list(settings.cutoffs),
        "limit": data.limit, "hyde": settings.hyde,
    }


def run_retrieval_eval(plan: RunPlan, console: Console, progress: bool) -> dict[str, Any]:
    """Measure the plan's retriever on its benchmark into ``plan.out``; returns the summary written."""
    from dynrag.retrieval.base import close_retriever
    from dynrag.retrieval.factory import open_retriever
    from dynrag.run.assemble import open_model

    retriever, data, settings, out = plan.retriever, plan.dataset, plan.retrieval_eval, Path(plan.out)
    assert retriever is not None and data is not None and settings is not None
    ks = list(settings.cutoffs)
    examples, _ = load_questions(data.name, data.given, console, skip_bad=data.skip_bad, limit=data.limit)
    with lock_run(out):
        # The directory records its kind first, so no other command mistakes it for its own.
        atomic_write_json(out / CONFIG, retrieval_config(plan))
        index_dir = run_index(retriever.index, out, examples, console, progress) if retriever.corpus else None
        passages = questions = written = None
        if settings.hyde:
            from dynrag.retrieval.hyde_cache import HydePassages

            passages = HydePassages(open_model(plan.model, progress), settings.hyde_cache or out / "hyde.jsonl",
                                    settings.hyde_max_new_tokens)
            # Write every passage before searching, so queries_per_second is search alone
            # whether the passages were written now or read back.
            questions = [ex.question for ex in examples if ex.supporting]
            written = write_hyde_passages(passages, questions, progress)
        # The options as given: the backend's own speed is what is measured (no numpy default).
        searcher = open_retriever(retriever.name, index_dir, retriever.options, work_dir=out, progress=progress)
        try:
            result = evaluate_retrieval(
                searcher, examples, ks, progress=progress, query_transform=passages.expand if passages else None
            )
        finally:
            close_retriever(searcher)
        meta = {
            "retriever": retriever.name,
            "options": retriever.options,
            "dataset": data.name,
            "data": str(data.data),
            "corpus": retriever.corpus if retriever.corpus in ("contexts", None) else str(index_dir.resolve()),
            "index": str(index_dir.resolve()) if index_dir is not None else None,
            "k": ks,
            "query_transform": "hyde" if passages else "none",
        }
        if passages is not None:
            meta.update(hyde_summary(passages, questions, written, result.summary))
        write_outputs(out, result, meta)
        return {**meta, **result.summary}  # what summary.json now holds
