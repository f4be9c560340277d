"""`dynrag eval-retrieval` as a run: the questions, the index, the query transform's texts if
one is asked for (HyDE passages, rewritten queries, sub-questions), the search and the output files of one ``eval-retrieval`` plan (``make_plan(..., command="eval-retrieval")``).
The measuring itself is in ``retrieval.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from dynrag.eval.retrieval import (evaluate_retrieval, no_gold_found_warning, transform_summary, write_outputs,
                                   write_query_texts)
from dynrag.io.rundir import CONFIG, RETRIEVAL_RUN_FORMAT, lock_run
from dynrag.eval.steps import load_questions, run_index
from dynrag.io.files import atomic_write_json
from dynrag.retrieval.transform_registry import transform_traits, writes_text
from dynrag.config import RunConfig
from dynrag.run.jobs import JOBS, JobTraits
from dynrag.run.plan import RunPlan, make_plan


def retrieval_config(plan: RunPlan) -> dict[str, Any]:
    """config.json of an eval-retrieval directory (its keys are the directory's format)."""
    retriever, data, settings = plan.retriever, plan.dataset, plan.retrieval_eval
    assert retriever is not None and data is not None and settings is not None
    traits = transform_traits(settings.query_transform)
    return {
        "format": RETRIEVAL_RUN_FORMAT, "retriever": retriever.name, "options": retriever.options,
        "dataset": data.name, "data": str(data.data), "corpus": retriever.corpus, "k": list(settings.cutoffs),
        "limit": data.limit, "hyde": traits.single_hyde, "query_transform": settings.query_transform,
        **({"hyde_documents": settings.hyde_documents} if traits.samples else {}),
    }


def default_cache(out: Path, transform: str) -> Path:
    """Where a run keeps its transform's texts when no ``hyde_cache`` is given: HyDE passages in
    OUT/hyde.jsonl (as before the other transforms), rewrites and sub-questions in OUT/query-texts.jsonl."""
    return out / ("hyde.jsonl" if transform_traits(transform).hyde_like else "query-texts.jsonl")


def open_transformer(plan: RunPlan, out: Path, progress: bool):
    """The plan's QueryTransformer over its model (prompted in the model's chat template when it
    reads best that way), its texts cached in ``hyde_cache`` or the run directory."""
    from dynrag.methods.prompting import chat_frame
    from dynrag.retrieval.hyde_cache import QueryTexts
    from dynrag.retrieval.query_transforms import QueryTransformer
    from dynrag.run.assemble import open_model

    settings = plan.retrieval_eval
    assert settings is not None
    lm = open_model(plan.model, progress)
    texts = QueryTexts(lm, settings.hyde_cache or default_cache(out, settings.query_transform), chat_frame(lm))
    return QueryTransformer(settings.query_transform, texts, hyde_documents=settings.hyde_documents,
                            hyde_max_new_tokens=settings.hyde_max_new_tokens)


def run_retrieval_eval(plan: RunPlan, console: Console, progress: bool) -> dict[str, Any]:
    """Measure the plan's retriever on its benchmark into ``plan.out``; returns the summary written."""
    from dynrag.retrieval.base import close_retriever
    from dynrag.retrieval.factory import open_retriever

    retriever, data, settings, out = plan.retriever, plan.dataset, plan.retrieval_eval, Path(plan.out)
    assert retriever is not None and data is not None and settings is not None
    ks = list(settings.cutoffs)
    examples, _ = load_questions(data.name, data.given, console, skip_bad=data.skip_bad, limit=data.limit)
    with lock_run(out):
        # The directory records its kind first, so no other command mistakes it for its own.
        atomic_write_json(out / CONFIG, retrieval_config(plan))
        transformer = questions = written = None
        if writes_text(settings.query_transform):
            transformer = open_transformer(plan, out, progress)  # a model that cannot do it fails before the index
            # Write every text before searching, so queries_per_second is search alone
            # whether the texts were written now or read back.
            questions = [ex.question for ex in examples if ex.supporting]
            written = write_query_texts(transformer, questions, progress)
        index_dir = run_index(retriever.index, out, examples, console, progress) if retriever.corpus else None
        # The options as given: the backend's own speed is what is measured (no numpy default).
        searcher = open_retriever(retriever.name, index_dir, retriever.options, work_dir=out, progress=progress)
        try:
            result = evaluate_retrieval(
                searcher, examples, ks, progress=progress, query_transform=transformer.queries if transformer else None
            )
        finally:
            close_retriever(searcher)
        # A chunked index holds pieces of the paragraphs, never a gold paragraph itself: recall by
        # id or content is 0 there by construction, and the tables that chunk score by text instead.
        chunked = index_dir is not None and chunking_of(index_dir) not in (None, "none")
        if not chunked and (warning := no_gold_found_warning(result.summary, str(index_dir or retriever.name))) is not None:
            from rich.text import Text

            console.print(Text.assemble(("warning: ", "bold yellow"), warning), soft_wrap=True)
        meta = {
            "retriever": retriever.name,
            "options": retriever.options,
            "dataset": data.name,
            "data": str(data.data),
            "corpus": retriever.corpus if retriever.corpus in ("contexts", None) else str(index_dir.resolve()),
            "index": str(index_dir.resolve()) if index_dir is not None else None,
            "k": ks,
            "query_transform": settings.query_transform,
        }
        if transformer is not None:
            meta.update(transform_summary(transformer, questions, written, result.summary))
        write_outputs(out, result, meta)
        return {**meta, **result.summary}  # what summary.json now holds


def chunking_of(index_dir: Path | str) -> str | None:
    """The chunking an index was built with (its manifest's ``chunk``), None when it cannot tell."""
    from dynrag.errors import IndexDirError
    from dynrag.retrieval.manifest import read_manifest

    try:
        chunk = read_manifest(index_dir).get("chunk")
    except IndexDirError:
        return None
    return chunk if isinstance(chunk, str) else None


def retrieval_eval_job(config: RunConfig, *, console: Console, progress: bool = True) -> dict[str, Any]:
    """The `eval-retrieval` job: planned from its run configuration, then every question ranked."""
    return run_retrieval_eval(make_plan(config, command="eval-retrieval"), console, progress)


JOBS.add("eval-retrieval", retrieval_eval_job, RunConfig, summary="retrieval alone: recall@K, support_all@K, MRR",
         traits=JobTraits(lock="out", loop="own"))
