"""Retrieval-only evaluation: recall@K, support_all@K and MRR of a retriever on a QA benchmark's
supporting passages, plus its speed; the engine of ``dynrag eval-retrieval``.

Metrics, per question with at least one gold supporting passage (questions without any are
counted in ``n_without_support`` and left out):

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

from dynrag.errors import ConfigError, DynragError
from dynrag.eval.loaders import QAExample
from dynrag.retrieval.base import Retriever

QueryTransform = Callable[[list[str]], list[str]]


# ---- metrics (pure) ---------------------------------------------------------------------------


def recall_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """Fraction of the distinct gold ids found in ``ranked[:k]``."""
    gold_set = set(gold)
    if not gold_set:
        raise ValueError("recall needs at least one gold id")
    return len(gold_set & set(ranked[:k])) / len(gold_set)


def support_all_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """1.0 when every gold id is in ``ranked[:k]``, else 0.0."""
    gold_set = set(gold)
    if not gold_set:
        raise ValueError("support_all needs at least one gold id")
    return 1.0 if gold_set <= set(ranked[:k]) else 0.0


def reciprocal_rank(ranked: Sequence[str], gold: Iterable[str]) -> float:
    """1 / (1-based rank of the first gold id in ``ranked``); 0.0 when none is there."""
    gold_set = set(gold)
    for rank, pid in enumerate(ranked, start=1):
        if pid in gold_set:
            return 1.0 / rank
    return 0.0


def parse_ks(text: str) -> list[int]:
    """"3,10" -> [3, 10] (sorted, distinct, each >= 1)."""
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError as e:
        raise ConfigError(f"--k {text!r}: expected comma-separated whole numbers such as 3,10") from e
    if not ks or ks[0] < 1:
        raise ConfigError(f"--k {text!r}: expected comma-separated numbers >= 1 such as 3,10")
    return ks


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

    from tqdm import tqdm

    bar = tqdm(total=len(usable), desc="Retrieving", unit=" q", disable=not progress, mininterval=0.5)
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
    from dynrag.io import atomic_write_json, atomic_write_text, json_line

    out.mkdir(parents=True, exist_ok=True)
    summary = {**meta, **result.summary}
    atomic_write_text(out / "rankings.jsonl", "".join(map(json_line, result.rankings)))
    atomic_write_json(out / "summary.json", summary)
    return out / "summary.json"
