"""Retrieval-only evaluation: recall@K, support_all@K and MRR of a retriever on a QA benchmark's
supporting passages, plus its speed; the engine of ``dynrag eval-retrieval`` (eval/cli.py).

Metrics (pure functions in metrics.py), per question with at least one gold supporting passage
(questions without any are counted in ``n_without_support`` and left out):

- ``recall@K``: the fraction of the question's distinct gold passages among the top K hits;
- ``support_all@K``: 1 when every gold passage is in the top K, else 0;
- ``mrr``: 1 / rank of the first gold passage among the top max(K) hits (0 when none is);
each averaged over the questions. ``queries_per_second`` counts the questions searched divided by
the wall time of the searches (and of ``query_transform``, when given), after one warm-up query.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from dynrag.errors import ConfigError, DynragError
from dynrag.datasets.loaders import QAExample
from dynrag.datasets.metrics import recall_at_k, reciprocal_rank, support_all_at_k
from dynrag.retrieval.base import Retriever

QueryTransform = Callable[[list[str]], list[str]]


# ---- evaluation -------------------------------------------------------------------------------


@dataclass
class RetrievalResult:
    summary: dict[str, Any]
    rankings: list[dict[str, Any]] = field(default_factory=list)


def evaluate_retrieval(
    retriever: Retriever,
    examples: Iterable[QAExample],
    ks: Sequence[int] = (3, 10),
    *,
    batch_size: int = 16,
    query_transform: QueryTransform | None = None,
    progress: bool = False,
) -> RetrievalResult:
    """Search every question with gold support and score its rankings.

    ``query_transform`` (e.g. HyDE: question -> question + hypothetical passage) maps a batch of
    questions to the texts actually searched; it is timed as part of retrieval.
    """
    ks = sorted(set(ks))
    if not ks or ks[0] < 1:
        raise ConfigError("k values must be >= 1")
    depth = ks[-1]
    usable = [ex for ex in examples if ex.supporting]
    total = 0
    skipped = 0
    # ``examples`` may be a generator: count what was left out from the list we kept.
    if isinstance(examples, list):
        total = len(examples)
        skipped = total - len(usable)
    if not usable:
        raise DynragError("no question has gold supporting passages: nothing to evaluate")

    def queries_for(batch: list[QAExample]) -> list[str]:
        questions = [ex.question for ex in batch]
        if query_transform is None:
            return questions
        out = list(query_transform(questions))
        if len(out) != len(questions):
            raise DynragError(f"query_transform returned {len(out)} queries for {len(questions)} questions")
        return out

    retriever.search_batch(queries_for(usable[:1]), depth)  # warm-up: JIT, caches, lazy loads

    from dynrag.progress import stderr_bar

    bar = stderr_bar(len(usable), "Retrieving", progress, unit=" q")
    rankings: list[dict[str, Any]] = []
    elapsed = 0.0
    with bar:
        for start in range(0, len(usable), batch_size):
            batch = usable[start : start + batch_size]
            t0 = time.perf_counter()
            hits = retriever.search_batch(queries_for(batch), depth)
            elapsed += time.perf_counter() - t0
            for ex, ex_hits in zip(batch, hits):
                rankings.append(
                    {"id": ex.id, "gold": list(dict.fromkeys(ex.supporting)), "ranked": [h.id for h in ex_hits]}
                )
            bar.update(len(batch))

    n = len(rankings)
    summary: dict[str, Any] = {"n": n, "n_without_support": skipped}
    for k in ks:
        summary[f"recall@{k}"] = sum(recall_at_k(r["ranked"], r["gold"], k) for r in rankings) / n
    for k in ks:
        summary[f"support_all@{k}"] = sum(support_all_at_k(r["ranked"], r["gold"], k) for r in rankings) / n
    summary["mrr"] = sum(reciprocal_rank(r["ranked"], r["gold"]) for r in rankings) / n
    summary["mrr_depth"] = depth
    summary["queries_per_second"] = n / elapsed if elapsed > 0 else float("inf")
    summary["search_seconds"] = elapsed
    return RetrievalResult(summary, rankings)


def write_outputs(out: Path, result: RetrievalResult, meta: dict[str, Any]) -> Path:
    """DIR/summary.json (meta + metrics) and DIR/rankings.jsonl; returns the summary path."""
    from dynrag.io.files import atomic_write_json, atomic_write_text
    from dynrag.io.jsonl import json_line

    out.mkdir(parents=True, exist_ok=True)
    summary = {**meta, **result.summary}
    atomic_write_text(out / "rankings.jsonl", "".join(map(json_line, result.rankings)))
    atomic_write_json(out / "summary.json", summary)
    return out / "summary.json"


def write_hyde_passages(passages, questions: list[str], progress: bool) -> int:
    """Have a passage for every question; returns how many the model wrote now."""
    from dynrag.progress import stderr_bar

    before = passages.generated
    with stderr_bar(len(questions), "HyDE passages", progress, unit=" q") as bar:
        for question in questions:
            passages.passage(question)
            bar.update(1)
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
    table = Table(title=Text(title))
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("n", str(summary["n"]))
    for name in [f"recall@{k}" for k in ks] + [f"support_all@{k}" for k in ks] + ["mrr"]:
        table.add_row(name, f"{summary[name]:.3f}")
    table.add_row("queries_per_second", f"{summary['queries_per_second']:.1f}")
    if "queries_per_second_with_generation" in summary:
        table.add_row("queries_per_second_with_generation", f"{summary['queries_per_second_with_generation']:.2f}")
    return table
