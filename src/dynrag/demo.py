"""`dynrag demo`: the packaged demo corpus and questions, answered without and with retrieval."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from rich.console import Console
from rich.rule import Rule

from dynrag.corpus import read_passages
from dynrag.data import demo_passages_path, load_demo_questions
from dynrag.eval.metrics import exact_match
from dynrag.lm import load_lm
from dynrag.lm.bundled import cache_root
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.registry import build_method
from dynrag.render import render_answer
from dynrag.retrieval.bm25 import BM25Index


def demo_index_dir() -> Path:
    """The demo index lives in the cache, keyed by the corpus file's hash so edits rebuild it."""
    digest = hashlib.sha256(demo_passages_path().read_bytes()).hexdigest()[:12]
    return cache_root() / f"demo-index-{digest}"


def ensure_demo_index(console: Console) -> BM25Index:
    out = demo_index_dir()
    if not (out / "manifest.json").exists():
        console.print(f"building the demo index in {out}")
        BM25Index.build(read_passages(demo_passages_path()), out, progress=True)
    return BM25Index.load(out, backend="numpy")


def run_demo(console: Console, model_spec: str = "bundled", limit: int | None = None) -> dict[str, float]:
    index = ensure_demo_index(console)
    questions = load_demo_questions()[:limit]
    with console.status(f"loading model {model_spec} ..."):
        lm = load_lm(model_spec)
    builder = PromptBuilder.for_dataset("default")
    methods = {name: build_method(name, lm, index, {}, builder) for name in ("direct", "single")}
    console.print(
        f"[bold]dynrag demo[/bold]: {len(questions)} questions over {len(index)} passages "
        f"(a fictional world the model cannot know), model {lm.name}"
    )
    correct = {name: 0.0 for name in methods}
    started = time.perf_counter()
    for q in questions:
        console.print(Rule(q.id))
        closed_book = methods["direct"].answer(q.question)
        mark = "✓" if exact_match(closed_book.final_answer, q.answers) else "✗"
        console.print(f"[dim]without retrieval ({closed_book.trace.seconds:.1f} s):[/dim] "
                      f"{closed_book.final_answer or '(no answer)'} {mark}")
        correct["direct"] += exact_match(closed_book.final_answer, q.answers)
        grounded = methods["single"].answer(q.question)
        correct["single"] += exact_match(grounded.final_answer, q.answers)
        render_answer(console, grounded, gold=q.answers)
    n = max(len(questions), 1)
    console.print(Rule("summary"))
    for name, hits in correct.items():
        console.print(f"{name:>8}: exact match {hits:.0f}/{len(questions)} ({hits / n:.0%})")
    console.print(f"total time {time.perf_counter() - started:.1f} s")
    return {name: hits / n for name, hits in correct.items()}
