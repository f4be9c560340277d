"""`dynrag demo`: the packaged demo corpus and questions, answered without and with retrieval."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from dynrag.corpus import read_passages
from dynrag.data import DemoQuestion, demo_passages_path, load_demo_questions
from dynrag.eval.metrics import score_answer
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
        console.print(Text(f"building the demo index in {out}"))
        BM25Index.build(read_passages(demo_passages_path()), out, progress=True)
    return BM25Index.load(out, backend="numpy")


def ordered_demo_questions() -> list[DemoQuestion]:
    # Single-hop first: they show retrieval at work; the multi-hop ones show a 135M reader's limit.
    return sorted(load_demo_questions(), key=lambda q: q.hops != "single-hop")


def run_demo(console: Console, model_spec: str = "bundled", limit: int | None = None) -> dict[str, float]:
    """Answer the demo questions without and with retrieval; returns exact match per method."""
    index = ensure_demo_index(console)
    questions = ordered_demo_questions()[:limit]
    with console.status(Text(f"loading model {model_spec} ...")):
        lm = load_lm(model_spec)
    builder = PromptBuilder.for_dataset("default")
    methods = {name: build_method(name, lm, index, {}, builder) for name in ("direct", "single")}
    console.print(Text.assemble(
        ("dynrag demo", "bold"),
        f": {len(questions)} questions over {len(index)} passages (a fictional world the model cannot know), "
        f"model {lm.name}",
    ))
    tally: dict[str, GroupTally] = {}
    started = time.perf_counter()
    for q in questions:
        console.print(Rule(Text(f"{q.id} · {q.hops}")))
        closed_book = methods["direct"].answer(q.question)
        closed_score = score_answer(closed_book.final_answer, closed_book.text, q.answers)
        mark = "✓" if closed_score.em else "✗"
        console.print(Text.assemble((f"without retrieval ({closed_book.trace.seconds:.1f} s):", "dim"),
                                    f" {closed_book.final_answer or '(no answer)'} {mark}"))
        grounded = methods["single"].answer(q.question)
        grounded_score = score_answer(grounded.final_answer, grounded.text, q.answers)
        render_answer(console, grounded, gold=q.answers)
        retrieved = {hit.id for r in grounded.trace.retrievals for hit in r.hits}
        group = tally.setdefault(q.hops, GroupTally())
        group.add(closed_score.em, grounded_score.em, grounded_score.f1,
                  found=sum(s in retrieved for s in q.supporting), needed=len(q.supporting))
    console.print(Rule("summary"))
    console.print(summary_table(tally))
    console.print(f"total time {time.perf_counter() - started:.1f} s")
    n = max(sum(g.n for g in tally.values()), 1)
    return {
        "direct": sum(g.direct_em for g in tally.values()) / n,
        "single": sum(g.single_em for g in tally.values()) / n,
    }


@dataclass
class GroupTally:
    n: int = 0
    direct_em: float = 0.0
    single_em: float = 0.0
    single_f1: float = 0.0
    supporting_found: int = 0
    supporting_needed: int = 0

    def add(self, direct_em: float, single_em: float, single_f1: float, found: int, needed: int) -> None:
        self.n += 1
        self.direct_em += direct_em
        self.single_em += single_em
        self.single_f1 += single_f1
        self.supporting_found += found
        self.supporting_needed += needed


def summary_table(tally: dict[str, GroupTally]) -> Table:
    table = Table(title="exact match without (direct) and with one retrieval (single)")
    for column in ("questions", "n", "direct EM", "single EM", "single F1", "supporting passages retrieved"):
        table.add_column(column, justify="left" if column == "questions" else "right")
    for name in sorted(tally, key=lambda k: k != "single-hop"):
        g = tally[name]
        table.add_row(
            name, str(g.n), f"{g.direct_em:.0f}/{g.n}", f"{g.single_em:.0f}/{g.n}",
            f"{g.single_f1 / max(g.n, 1):.2f}", f"{g.supporting_found}/{g.supporting_needed}",
        )
    return table
