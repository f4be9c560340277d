"""A retrieval table's reranking rows: the first stage's ranking (another row of the table) cut to
its top candidates, reordered by a reranker of the chain (``rerank/registry.py``), written as an
eval-retrieval directory would be (``rankings.jsonl``, ``summary.json``) so the table scores it
like any row. Each question's new ranking is appended as it is made: a killed run resumes at the
next question and never ranks one twice."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from dynrag.errors import ConfigError
from dynrag.io.files import atomic_write_json
from dynrag.io.jsonl import JsonlAppender, read_jsonl
from dynrag.reproduce.retrieval_tables import RetrievalRow

RERANK_FORMAT = "dynrag-reproduce-rerank/1"


def rerank_row(row: RetrievalRow, first_stage: Path, passages_file: Path, questions: dict[str, str], out: Path,
               model: str, console, progress: bool) -> dict[str, Any]:
    """Rerank ``first_stage``'s rankings (a finished row directory) into ``out``; returns its summary."""
    from dynrag.corpus.readers import read_passages
    from dynrag.progress import stderr_bar
    from dynrag.rerank.registry import RERANKERS, reranker_traits
    from dynrag.retrieval.base import Hit
    from dynrag.retrieval.embedder import Embedder
    from dynrag.run.assemble import open_model

    if row.rerank not in RERANKERS:
        raise ConfigError(f"row {row.key}: unknown reranker {row.rerank!r}; choose one of: {RERANKERS.choices(', ')}")
    rankings = read_jsonl(first_stage / "rankings.jsonl")
    passages = {p.id: p for p in read_passages(passages_file)}
    out.mkdir(parents=True, exist_ok=True)
    done = {r["id"]: r for r in read_jsonl(out / "rankings.jsonl", repair=True)}
    # Only the reranker that needs a model loads it: the LM reranker the answering model, the
    # embedding reranker (through ``embedder``, called once when it is opened) the sentence embedder.
    needs_model = reranker_traits(row.rerank).uses_answering_model
    reranker = RERANKERS.open(row.rerank, dict(row.options), lm=open_model(model, progress) if needs_model else None,
                              embedder=Embedder.load)
    todo = [r for r in rankings if r["id"] not in done]
    if done:
        console.print(f"  resuming: {len(done)} of {len(rankings)} questions reranked earlier")
    with JsonlAppender(out / "rankings.jsonl") as sink, stderr_bar(len(todo), "Reranking", progress, unit=" q") as bar:
        for record in todo:
            hits = [Hit(pid, passages[pid].title, passages[pid].text, 0.0) for pid in record["ranked"][: row.candidates]]
            started = time.perf_counter()
            ordered = reranker.rerank(questions[record["id"]], hits, top_k=len(hits))
            seconds = time.perf_counter() - started
            new = {"id": record["id"], "gold": record["gold"], "ranked": [h.id for h in ordered], "seconds": seconds}
            sink.append(new)
            done[new["id"]] = new
            bar.update(1)
    ranked = [done[r["id"]] for r in rankings]
    summary = {"format": RERANK_FORMAT, "reranker": row.rerank, "candidates": row.candidates,
               "first_stage": str(first_stage), "n": len(ranked),
               "search_seconds": sum(r.get("seconds", 0.0) for r in ranked)}
    atomic_write_json(out / "summary.json", summary)
    return summary

