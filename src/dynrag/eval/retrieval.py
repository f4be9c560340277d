"""Retrieval-only evaluation: recall@K, support_all@K and MRR of a retriever on a QA benchmark's
supporting passages, plus its speed; the engine of ``dynrag eval-retrieval`` (eval/cli.py).

Metrics (pure functions in metrics.py), per question with at least one gold supporting passage
(questions without any are counted in ``n_without_support`` and left out). A hit is a gold passage
when its id is a gold id, or when its title and text hash to one (``passage_key``): an index built
from another copy of the same paragraphs, such as a Wikipedia dump, gives them other ids.

- ``recall@K``: the fraction of the question's distinct gold passages among the top K hits;
- ``support_all@K``: 1 when every gold passage is in the top K, else 0;
- ``mrr``: 1 / rank of the first gold passage among the top max(K) hits (0 when none is);
each averaged over the questions. ``queries_per_second`` counts the questions searched divided by
the wall time of the searches (and of ``query_transform``, when given, and of fusing the rankings
of a question searched several times), after one warm-up query.
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
from dynrag.datasets.examples import passage_key
from dynrag.datasets.loaders import QAExample
from dynrag.datasets.metrics import recall_at_k, reciprocal_rank, support_all_at_k
from dynrag.retrieval.base import Retriever
from dynrag.retrieval.transform_registry import QUERY_TRANSFORMS, transform_traits

# A batch of questions -> what each is searched with: one text, or several whose rankings are fused
# (query decomposition: retrieval/query_transforms.py).
QueryTransform = Callable[[list[str]], Sequence[str | Sequence[str]]]


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
    questions to the texts actually searched, one per question, or a list of texts for a question
    searched several times (their rankings fused by reciprocal rank, ``fuse_rankings``); it is
    timed as part of retrieval, and each ranking records what was searched (``queries``).
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

    def queries_for(batch: list[QAExample]) -> list[str | list[str]]:
        questions = [ex.question for ex in batch]
        if query_transform is None:
            return questions  # type: ignore[return-value]
        out = [q if isinstance(q, str) else list(q) for q in query_transform(questions)]
        if len(out) != len(questions):
            raise DynragError(f"query_transform returned {len(out)} queries for {len(questions)} questions")
        if any(not q or not all(isinstance(t, str) for t in q) for q in out if isinstance(q, list)):
            raise DynragError("query_transform returned an empty or non-text list of queries for a question")
        return out

    search_ranked(retriever, queries_for(usable[:1]), depth)  # warm-up: JIT, caches, lazy loads
    passages: dict[str, tuple[str, str]] = {}  # index id -> (title, text), hashed only when scored

    from dynrag.progress import stderr_bar

    bar = stderr_bar(len(usable), "Retrieving", progress, unit=" q")
    rankings: list[dict[str, Any]] = []
    elapsed = 0.0
    with bar:
        for start in range(0, len(usable), batch_size):
            batch = usable[start : start + batch_size]
            t0 = time.perf_counter()
            queries = queries_for(batch)
            ranked = search_ranked(retriever, queries, depth, passages)
            elapsed += time.perf_counter() - t0
            for ex, query, ids in zip(batch, queries, ranked):
                record = {"id": ex.id, "gold": list(dict.fromkeys(ex.supporting)), "ranked": ids}
                as_gold = gold_ids(ids, record["gold"], passages)
                if as_gold != ids:  # some hits are gold by content: what was scored, beside the index's ids
                    record["ranked_as_gold"] = as_gold
                if query_transform is not None:
                    record["queries"] = [query] if isinstance(query, str) else query
                rankings.append(record)
            bar.update(len(batch))

    n = len(rankings)
    scored = [(r.get("ranked_as_gold", r["ranked"]), r["gold"]) for r in rankings]
    summary: dict[str, Any] = {"n": n, "n_without_support": skipped}
    for k in ks:
        summary[f"recall@{k}"] = sum(recall_at_k(ranked, gold, k) for ranked, gold in scored) / n
    for k in ks:
        summary[f"support_all@{k}"] = sum(support_all_at_k(ranked, gold, k) for ranked, gold in scored) / n
    summary["mrr"] = sum(reciprocal_rank(ranked, gold) for ranked, gold in scored) / n
    summary["gold_matched_by_content"] = sum(1 for r in rankings if "ranked_as_gold" in r)
    summary["mrr_depth"] = depth
    summary["queries_per_second"] = n / elapsed if elapsed > 0 else float("inf")
    summary["search_seconds"] = elapsed
    return RetrievalResult(summary, rankings)


def gold_ids(ranked: Sequence[str], gold: Sequence[str], passages: dict[str, tuple[str, str]]) -> list[str]:
    """``ranked`` with each hit that is gold by content (its title and text, not its id) replaced by
    its gold id; ``passages`` holds each hit's (title, text) by id."""
    wanted = set(gold)
    out = []
    for hit in ranked:
        key = passage_key(*passages[hit]) if hit not in wanted and hit in passages else hit
        out.append(key if key in wanted else hit)
    return out


def no_gold_found_warning(summary: dict[str, Any], index: str) -> str | None:
    """One line when not one question's gold passage was among its hits, by id or by content:
    recall then measures the index's coverage, not the retriever."""
    depth = summary.get("mrr_depth")
    if summary.get("n") and depth and summary[f"recall@{depth}"] == 0:
        return (f"{index}: not one gold passage of the {summary['n']} questions is among their top {depth} hits, "
                "matched by id or by title and text (does this index hold the dataset's paragraphs?)")
    return None


def search_ranked(retriever: Retriever, queries: list[str | list[str]], depth: int,
                  passages: dict[str, tuple[str, str]] | None = None) -> list[list[str]]:
    """The ranked ids of each question: one search_batch call for the whole batch; a question with
    several queries gets their rankings fused (reciprocal rank, cut to ``depth``). ``passages``,
    when given, collects each hit's (title, text) by its id."""
    def seen(hits_lists):
        if passages is not None:  # kept, not hashed: the search is what the clock measures
            for found in hits_lists:
                for h in found:
                    passages.setdefault(h.id, (h.title or "", h.text or ""))
        return hits_lists

    if all(isinstance(q, str) for q in queries):  # one text a question: the rankings as they come
        return [[h.id for h in hits] for hits in seen(retriever.search_batch(queries, depth))]  # type: ignore[arg-type]
    from dynrag.retrieval.query_transforms import fuse_rankings

    groups = [[q] if isinstance(q, str) else q for q in queries]
    flat = [text for group in groups for text in group]
    hits = seen(retriever.search_batch(flat, depth))
    out, at = [], 0
    for group in groups:
        lists = [[h.id for h in found] for found in hits[at : at + len(group)]]
        at += len(group)
        out.append(lists[0] if len(lists) == 1 else fuse_rankings(lists, depth))
    return out


def write_outputs(out: Path, result: RetrievalResult, meta: dict[str, Any]) -> Path:
    """DIR/summary.json (meta + metrics) and DIR/rankings.jsonl; returns the summary path."""
    from dynrag.io.files import atomic_write_json, atomic_write_text
    from dynrag.io.jsonl import json_line

    out.mkdir(parents=True, exist_ok=True)
    summary = {**meta, **result.summary}
    atomic_write_text(out / "rankings.jsonl", "".join(map(json_line, result.rankings)))
    atomic_write_json(out / "summary.json", summary)
    return out / "summary.json"


def write_query_texts(transformer, questions: list[str], progress: bool) -> int:
    """Have every text the questions' transform needs (a QueryTransformer); returns how many the
    model wrote now."""
    from dynrag.progress import stderr_bar

    written = 0
    with stderr_bar(len(questions), f"{transformer.name} texts", progress, unit=" q") as bar:
        for question in questions:
            written += transformer.write(question)
            bar.update(1)
    return written


def transform_summary(transformer, questions: list[str], written: int, summary: dict) -> dict:
    """What a query transform cost: texts written now or reused, the model's writing time (as
    recorded when each text was written, so a reused file reports the same figure) and queries/s
    counting it. A ``hyde`` run also keeps the keys its summaries had before the other transforms."""
    texts = transformer.texts
    generation = transformer.generation_seconds(questions)
    cache = str(Path(texts.path).resolve()) if texts.path else None
    reused = transformer.count(questions) - written
    seconds = summary["search_seconds"] + generation
    out = {
        **transformer.settings(), "query_model": texts.lm.name, "query_cache": cache,
        "texts_generated": written, "texts_reused": reused, "generation_seconds": generation,
        "queries_per_second_with_generation": summary["n"] / seconds if seconds > 0 else float("inf"),
    }
    if transformer.traits.single_hyde:
        out.update(hyde_model=texts.lm.name, hyde_cache=cache, hyde_generated=written, hyde_reused=reused,
                   hyde_generation_seconds=generation)
    return out


def transform_title(summary: dict) -> str:
    """What the summary's query transform adds to a table's title ("" for none, or one this version
    does not know)."""
    name = summary.get("query_transform")
    return transform_traits(name).title.format(n=summary.get("hyde_documents")) if name in QUERY_TRANSFORMS else ""


def summary_table(summary: dict, ks: list[int]) -> Table:
    """One row per metric (a wide row of columns wraps its headers in a narrow terminal)."""
    opts = ", ".join(f"{k}={v}" for k, v in summary.get("options", {}).items())
    transform = transform_title(summary)
    title = f"{summary['retriever']}" + (f" ({opts})" if opts else "") + transform + f" on {summary['dataset']}"
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
