"""The steps every evaluation command shares: load a benchmark's questions (reporting what was
left out) and find the index to search (the pooled contexts, built or reused, or a given one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from dynrag.errors import DataError
from dynrag.datasets.loaders import LoadReport, QAExample, load_examples
from dynrag.eval.pool import CONTEXTS_INDEX, contexts_index, pool_contexts
from dynrag.run.checks import check_corpus


def load_questions(
    dataset: str,
    data: Path,
    console: Console,
    *,
    aliases: dict[str, list[str]] | None = None,
    skip_bad: bool = False,
    limit: int | None = None,
) -> tuple[list[QAExample], LoadReport]:
    """The questions of a benchmark file; skipped and excluded records are reported on ``console``."""
    report = LoadReport()
    examples = list(load_examples(dataset, data, aliases=aliases, skip_bad=skip_bad, report=report, limit=limit))
    if report.skipped:
        console.print(Text.assemble((f"skipped {report.skipped} bad record(s)", "yellow"), f"; first: {report.messages[0]}"),
                      soft_wrap=True)
    for reason, count in report.excluded.items():
        console.print(Text(f"excluded {count} record(s): {reason}"), soft_wrap=True)
    if not examples:
        raise DataError(str(data), "no questions to evaluate")
    return examples, report


def corpus_index(corpus: str, out: Path, examples: list[QAExample], console: Console, progress: bool) -> Path:
    """The index directory to search: for "contexts", OUT/contexts-index holding the questions'
    pooled context paragraphs (reused when it holds exactly those, else rebuilt)."""
    return run_index(check_corpus(corpus), out, examples, console, progress)


def run_index(given: Path | None, out: Path, examples: list[QAExample], console: Console, progress: bool) -> Path:
    """``corpus_index`` for a corpus already checked: ``given`` (None: pool the contexts)."""
    if given is not None:
        from dynrag.retrieval.manifest import corpus_changes

        changed = corpus_changes(given)
        if changed:
            console.print(Text.assemble(("warning: ", "bold yellow"), changed), soft_wrap=True)
        return given
    index, built = contexts_index(out, pool_contexts(examples), progress=progress)
    index.close()
    console.print(Text(f"{'built' if built else 'reusing'} {out / CONTEXTS_INDEX} ({len(index)} passages)"), soft_wrap=True)
    return out / CONTEXTS_INDEX


def open_run_retriever(config: dict[str, Any], index_dir: str | Path | None, work_dir: Path, progress: bool) -> Any:
    """The retriever a resolved run config names, over ``index_dir`` (None for a search server),
    or None for a method that does not retrieve. BM25 parts search with bm25s's numpy backend
    unless the run chose one (see ``with_numpy_bm25``)."""
    from dynrag.run.assemble import open_plan_retriever
    from dynrag.run.plan import saved_retriever

    return open_plan_retriever(saved_retriever(config), Path(index_dir) if index_dir else None, work_dir=work_dir,
                               progress=progress)
