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

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dynrag.errors import ConfigError, DynragError
from dynrag.eval.loaders import QAExample
from dynrag.retrieval.base import Retriever

QueryTransform = Callable[[list[str]], list[str]]
RETRIEVERS = ("bm25", "dense", "hybrid", "milvus")


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


# ---- retriever construction for the command ---------------------------------------------------

OPTION_KEYS: dict[str, dict[str, type]] = {
    "bm25": {"backend": str},
    "dense": {"embedding_model": str, "batch_size": int, "backend": str},
    "hybrid": {
        "alpha": float, "fusion": str, "candidates": int, "embedding_model": str,
        "batch_size": int, "bm25_backend": str, "dense_backend": str,
    },
    "milvus": {
        "mode": str, "ranker": str, "alpha": float, "candidates": int, "uri": str,
        "collection": str, "embedding_model": str, "batch_size": int,
    },
}


def parse_retriever_options(retriever: str, pairs: Sequence[str]) -> dict[str, Any]:
    """``["alpha=0.3", ...]`` -> typed options valid for ``retriever``."""
    if retriever not in RETRIEVERS:
        raise ConfigError(f"unknown retriever {retriever!r}; choose one of: {', '.join(RETRIEVERS)}")
    allowed = OPTION_KEYS[retriever]
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ConfigError(f"--option {pair!r}: expected KEY=VALUE")
        if key not in allowed:
            raise ConfigError(
                f"--option {key}: not an option of retriever {retriever!r} "
                f"(options: {', '.join(sorted(allowed)) or 'none'})"
            )
        try:
            out[key] = allowed[key](value.strip())
        except ValueError as e:
            raise ConfigError(f"--option {pair!r}: {key} must be a {allowed[key].__name__}") from e
    return out


def open_retriever(
    name: str,
    index_dir: Path,
    options: dict[str, Any],
    *,
    work_dir: Path,
    progress: bool = True,
) -> Retriever:
    """A retriever over a BM25 index directory; the dense part is built next to it when missing
    (``index_dir/dense``), and the Milvus collection from the index's passages when missing."""
    from dynrag.retrieval.bm25 import BM25Index

    if name == "bm25":
        return BM25Index.load(index_dir, backend=options.get("backend", "auto"))
    embedder = _embedder(options)
    if name in ("dense", "hybrid"):
        from dynrag.retrieval.dense import DenseIndex

        backend = options.get("backend" if name == "dense" else "dense_backend", "auto")
        dense = _dense(index_dir, embedder, backend, options.get("batch_size", 64), progress)
        if name == "dense":
            return dense
        from dynrag.retrieval.hybrid import HybridRetriever

        bm25 = BM25Index.load(index_dir, backend=options.get("bm25_backend", "auto"))
        return HybridRetriever(
            bm25, dense, alpha=options.get("alpha", 0.3), fusion=options.get("fusion", "minmax"),
            candidates=options.get("candidates", 50),
        )
    if name == "milvus":
        from dynrag.retrieval.milvus import MilvusRetriever

        with BM25Index.load(index_dir, backend="numpy") as bm25:
            sha = bm25.manifest["corpus_sha256"]
            count = len(bm25)
            uri = options.get("uri") or str(work_dir / "milvus.db")
            collection = options.get("collection") or f"dynrag_{sha[:16]}"
            search = {k: options[k] for k in ("mode", "ranker", "alpha", "candidates") if k in options}
            if embedder is None:
                from dynrag.retrieval.embedder import Embedder

                embedder = Embedder.load()
            try:
                retriever = MilvusRetriever.open(uri, collection, embedder, **search)
                if len(retriever) == count:
                    return retriever
                retriever.close()
            except DynragError:
                pass
            return MilvusRetriever.build(
                (bm25.passage(i) for i in range(count)), uri, collection, embedder,
                batch_size=options.get("batch_size", 64), progress=progress, total=count, **search,
            )
    raise ConfigError(f"unknown retriever {name!r}; choose one of: {', '.join(RETRIEVERS)}")


def _embedder(options: dict[str, Any]) -> Any:
    if "embedding_model" not in options:
        return None
    from dynrag.retrieval.embedder import Embedder

    return Embedder.load(options["embedding_model"])


def _dense(index_dir: Path, embedder: Any, backend: Any, batch_size: int, progress: bool) -> Any:
    """The dense part of ``index_dir``, (re)built when missing, stale or made by another model."""
    from dynrag.retrieval.dense import DenseIndex

    try:
        dense = DenseIndex.load(index_dir, embedder, backend=backend)
        if embedder is None or dense.manifest["embedding_model"] == embedder.name:
            dense.batch_size = batch_size
            return dense
        dense.close()
    except DynragError:  # missing, stale, or built by a model of another dimension: rebuild
        pass
    if embedder is None:
        from dynrag.retrieval.embedder import Embedder

        embedder = Embedder.load()
    DenseIndex.build_alongside(index_dir, embedder, batch_size=batch_size, progress=progress)
    dense = DenseIndex.load(index_dir, embedder, backend=backend)
    dense.batch_size = batch_size
    return dense


def write_outputs(out: Path, result: RetrievalResult, meta: dict[str, Any]) -> Path:
    """DIR/summary.json (meta + metrics) and DIR/rankings.jsonl; returns the summary path."""
    from dynrag.eval.rundir import write_atomic, write_json

    out.mkdir(parents=True, exist_ok=True)
    summary = {**meta, **result.summary}
    write_atomic(out / "rankings.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in result.rankings))
    write_json(out / "summary.json", summary)
    return out / "summary.json"
