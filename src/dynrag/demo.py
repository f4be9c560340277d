"""`dynrag demo`: the packaged demo corpus and questions, answered without and with retrieval.

`dynrag demo` shows the idea in about a minute: on a few questions, closed book (`direct`)
against one retrieval before writing (`single`) against retrieval decided while writing
(`dragin`): the words shaded by trigger score, where retrieval fired, the query QFS built, what
it found and the answer. `dynrag demo --full` answers all 30 demo questions closed book and with
`single` and ends with a table by question kind.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from dynrag.data import DemoQuestion, load_demo_questions
from dynrag.datasets.metrics import score_answer
from dynrag.lm import load_lm
from dynrag.lm.base import LanguageModel
from dynrag.lm.bundled import cache_root, converted_dir, resolve_bundled
from dynrag.lm.spec import ModelSpec
from dynrag.methods.base import Answer
from dynrag.config import RunConfig
from dynrag.run.assemble import make_method
from dynrag.run.plan import RunPlan, make_plan
from dynrag.render import final_line, render_answer, render_trace
from dynrag.retrieval.demo_index import demo_index_dir, ensure_demo_index

# The quick demo's questions: on each, the default model's closed-book guess is wrong, and dragin
# retrieves while it writes and answers right. Picked by running the three methods on the demo's
# questions (benchmarks/pick_demo_questions.py; benchmarks/LOG.md, "The default reader"): on
# questions asking for a year Qwen2.5-0.5B is confident and wrong, so dragin never fires there.
QUICK_QUESTIONS = ("s04", "s09", "q10")
# Tight budgets keep the demo to a minute on two cores; the answers here need one sentence.
QUICK_OPTIONS: dict[str, dict[str, int]] = {
    "direct": {"max_new_tokens": 40},
    "single": {"max_new_tokens": 40},
    "dragin": {"max_new_tokens": 40, "chunk_tokens": 32, "max_retrievals": 2},
}


def ordered_demo_questions() -> list[DemoQuestion]:
    # Single-hop first: they show retrieval at work; the multi-hop ones show a small reader's limit.
    return sorted(load_demo_questions(), key=lambda q: q.hops != "single-hop")


def first_use(model_spec: str) -> bool:
    """Whether loading a bundled model will dequantise its GGUF weights first (not yet cached)."""
    spec = ModelSpec.parse(model_spec)
    if spec.kind != "bundled":
        return False
    model = resolve_bundled(spec.target)
    return not (converted_dir(model) / "model.safetensors").exists()


def load_model(console: Console, model_spec: str, progress: bool = True) -> LanguageModel:
    """Load the model, saying how long it took (the first use of a bundled model dequantises)."""
    converting = first_use(model_spec)
    what = "dequantising the bundled weights (first use only, cached afterwards)" if converting else "loading"
    started = time.perf_counter()
    if progress:
        with console.status(Text(f"{what} model {model_spec} ...")):
            lm = load_lm(model_spec)
    else:
        console.print(Text(f"{what} model {model_spec} ..."))
        lm = load_lm(model_spec, progress=False)
    seconds = time.perf_counter() - started
    note = f", the first use: dequantised and cached in {cache_root()}; later runs load in a few seconds" if converting else ""
    console.print(Text(f"model {lm.name} loaded in {seconds:.1f} s{note}"))
    return lm


def demo_plans(model_spec: str, options: dict[str, dict[str, int]]) -> dict[str, RunPlan]:
    """One `ask` plan per demo method over the demo index, as `dynrag ask` would make it."""
    return {name: make_plan(RunConfig(model=model_spec, method=name, options=dict(values), index=demo_index_dir()),
                            command="ask")
            for name, values in options.items()}


def run_demo(console: Console, model_spec: str = "bundled", limit: int | None = None, full: bool = False,
             progress: bool = True) -> dict[str, float]:
    """The quick demo (or, with ``full``, the 30-question table); returns exact match per method."""
    if not full:
        return run_quick_demo(console, model_spec, limit, progress)
    plans = demo_plans(model_spec, {"direct": {}, "single": {}})
    index = ensure_demo_index(console, progress)
    questions = ordered_demo_questions()[:limit]
    lm = load_model(console, model_spec, progress)
    methods = {name: make_method(plan, lm, index) for name, plan in plans.items()}
    console.print(Text.assemble(
        ("dynrag demo", "bold"),
        f": {len(questions)} questions over {len(index)} passages (a fictional world the model cannot know), "
        f"model {lm.name}",
    ))
    tally: dict[str, GroupTally] = {}
    started = time.perf_counter()
    for i, q in enumerate(questions, 1):
        console.print(Rule(Text(f"[{i}/{len(questions)}] {q.id} · {q.hops}")))
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
    console.print(next_steps())
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


def run_quick_demo(console: Console, model_spec: str = "bundled", limit: int | None = None,
                   progress: bool = True) -> dict[str, float]:
    """A few questions, closed book vs `single` vs `dragin`, with dragin's decisions shown."""
    started = time.perf_counter()
    by_id = {q.id: q for q in load_demo_questions()}
    questions = [by_id[i] for i in QUICK_QUESTIONS][:limit]
    plans = demo_plans(model_spec, QUICK_OPTIONS)  # a bad --model fails before the index is built
    index = ensure_demo_index(console, progress)
    lm = load_model(console, model_spec, progress)
    methods = {name: make_method(plan, lm, index) for name, plan in plans.items()}
    console.print(
        f"[bold]dynrag demo[/bold]: {len(questions)} questions over {len(index)} passages about a fictional "
        "region the model cannot know. Each is answered closed book ([bold]direct[/bold]), with one "
        "retrieval before writing ([bold]single[/bold]), and by [bold]dragin[/bold], which retrieves only "
        "when a word it writes is uncertain and attended to, and searches with the words it attends to."
    )
    exact = {name: 0.0 for name in methods}
    retrievals = 0
    for i, q in enumerate(questions, 1):
        console.print(Rule(Text(f"[{i}/{len(questions)}] {q.id} · {q.hops}")))
        console.print(Text.assemble(("Q ", "bold cyan"), q.question, ("   gold: " + " / ".join(q.answers), "dim")))
        answers: dict[str, Answer] = {}
        for name, method in methods.items():
            answers[name] = method.answer(q.question)
            exact[name] += score_answer(answers[name].final_answer, answers[name].text, q.answers).em
        console.print(_short_line("closed book (direct)", answers["direct"], q.answers))
        console.print(_short_line("one retrieval (single)", answers["single"], q.answers))
        found = [h.title for r in answers["single"].trace.retrievals for h in r.hits]
        console.print(Text(f"    single searched with the question and found: {'; '.join(found)}", style="dim"))
        console.print(_short_line("dynamic (dragin)", answers["dragin"], q.answers))
        render_trace(console, answers["dragin"])
        retrievals += len(answers["dragin"].trace.retrievals)
    n = max(len(questions), 1)
    console.print(Rule("summary"))
    console.print(
        f"exact match on {len(questions)} questions: closed book {exact['direct']:.0f}/{n}, single "
        f"{exact['single']:.0f}/{n}, dragin {exact['dragin']:.0f}/{n}; dragin retrieved {retrievals / n:.1f} "
        f"times a question, single once. These questions were picked to show dragin retrieving; over "
        f"benchmark questions it has not beaten single with readers this small (benchmarks/LOG.md). "
        f"total time {time.perf_counter() - started:.1f} s"
    )
    console.print(next_steps())
    return {name: value / n for name, value in exact.items()}


def _short_line(label: str, answer: Answer, gold: list[str]) -> Text:
    mark = "✓" if score_answer(answer.final_answer, answer.text, gold).em else "✗"
    line = final_line(answer, label=f"{label:<24}")
    line.append(f" {mark}  ({answer.trace.seconds:.1f} s, {len(answer.trace.retrievals)} retrievals)", style="dim")
    return line


def next_steps() -> Text:
    """One line on where to go next (the trace viewer where this install has the server)."""
    viewer = "`dynrag serve` (these traces in the browser viewer) · " if importlib.util.find_spec("dynrag.serve") else ""
    return Text(
        f"next: {viewer}`dynrag index` + `dynrag ask --method dragin` on your documents · "
        "`dynrag eval --method dragin` on a benchmark · `dynrag demo --full` (all 30 questions)",
        style="bold",
    )
