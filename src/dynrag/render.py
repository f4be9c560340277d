"""Terminal rendering of answers and their traces (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dynrag.methods.base import Answer


def _shorten(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _source(hit_id: str, width: int = 36) -> str:
    """A passage id to show: long paths keep their end (file name and chunk number)."""
    return hit_id if len(hit_id) <= width else "…" + hit_id[-(width - 1):]


def _shade(value: float, top: float) -> str:
    """Background from white (0) to red (>= top) for a word's trigger score."""
    level = 0.0 if top <= 0 else max(0.0, min(1.0, value / top))
    fade = int(255 - 175 * level)
    return f"black on rgb(255,{fade},{fade})"


def shaded_steps(answer: Answer, theta: float | None) -> Text | None:
    """The generated text, step by step, each word shaded by its trigger score.

    DRAGIN steps carry per-word RIND scores; FLARE steps per-token probabilities (shaded by
    1 - p). Thrown-away text is struck through and each retrieval is marked with ⟲.
    """
    steps = [s for s in answer.trace.steps if "score" in s.details or "probabilities" in s.details]
    if not steps:
        return None
    out = Text()
    for step in steps:
        d = step.details
        if "score" in d:
            top = theta if theta else max(d["score"] or [1.0])
            units = [(w + " ", sc) for w, sc in zip(d["words"], d["score"])]
            cut_at = d.get("trigger")
        else:
            top = 1.0
            units = [(tok, 1.0 - p) for tok, p in zip(d["tokens"], d["probabilities"])]
            cut_at = 0 if step.kind == "tentative" else None
        for i, (unit, score) in enumerate(units):
            style = _shade(score, top)
            if cut_at is not None and i >= cut_at:
                style += " strike"
            if cut_at is not None and i == cut_at:
                out.append(" ⟲ ", style="bold magenta")
            out.append(unit, style=style)
    return out


def narrative_steps(answer: Answer) -> Text | None:
    """DeepRAG's sub-questions, one a line: the decision (with its margin) and the answer."""
    decided = [s.details for s in answer.trace.steps if s.kind == "answer" and "decision" in s.details]
    if not decided:
        return None
    out = Text()
    for d in decided:
        margin = f" {d['margin']:+.2f}" if d.get("margin") is not None else ""
        style = "bold magenta" if d["decision"] == "retrieve" else "bold blue"
        out.append(f"  {d['step']}. ", style="dim")
        out.append(d["subquery"])
        out.append(f"  [{d['decision']}{margin}]  ", style=style)
        out.append(d.get("answer", ""), style="bold")
        out.append("\n")
    return out
def truncation_line(note: dict) -> str:
    """What a prompt left out to fit the context window, in words."""
    reason = note.get("reason", "the context window")
    if note.get("part") == "exemplars":
        return f"prompt kept {note['kept']} of {note['of']} exemplars to fit the model's {reason}"
    return (f"passage {note.get('id')!r} cut to {note.get('kept_tokens', 0):,} tokens ({note.get('kept_chars', 0):,} of "
            f"{note.get('chars', 0):,} characters) to fit the model's {reason}")


def render_answer(console: Console, answer: Answer, gold: list[str] | None = None) -> None:
    trace = answer.trace
    console.print(Text.assemble(("Q ", "bold cyan"), trace.question))
    console.print(final_line(answer, gold))
    render_trace(console, answer)


def final_line(answer: Answer, gold: list[str] | None = None, label: str = "A ") -> Text:
    final = Text.assemble((label, "bold green"), (answer.final_answer or "(no answer)", "bold"))
    if gold is not None:
        final.append(f"   gold: {' / '.join(gold)}", style="dim")
    return final


def render_trace(console: Console, answer: Answer) -> None:
    """The generated text (shaded by trigger score where the method scores words), each retrieval
    with where it fired, its query and what it found, and a line of cost."""
    trace = answer.trace
    shaded = shaded_steps(answer, trace.options.get("theta"))
    narrative = narrative_steps(answer)
    if narrative is not None:
        console.print(Text("  sub-questions: decision [retrieve | parametric, margin], answer:", style="dim"))
        console.print(narrative, end="")
    elif shaded is not None:
        console.print(Text("  words shaded by trigger score (red = likely to retrieve; ⟲ = retrieval, struck = thrown away):",
                           style="dim"))
        console.print(shaded)
    else:
        console.print(Text(_shorten(answer.text, 400), style="dim"))
    for n, retrieval in enumerate(trace.retrievals, 1):
        console.print(
            Text.assemble(
                (f"  retrieval {n}", "bold magenta"),
                (f" [{retrieval.reason}]" if retrieval.reason and retrieval.position else "", "magenta"),
                (f" after {retrieval.position} tokens" if retrieval.position else " before generation", "dim"),
                ("  query: ", "dim"),
                _shorten(retrieval.query, 120),
            )
        )
        table = Table(show_header=False, box=None, padding=(0, 1), pad_edge=False)
        table.add_column(justify="right", style="yellow", no_wrap=True)
        table.add_column(style="cyan", no_wrap=True)
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        for hit in retrieval.hits:
            # The id says where a hit comes from: for a folder corpus the file's path, and after
            # --chunk its chunk number (notes/a.md#3); many chunks of a file share its title.
            table.add_row(f"{hit.score:6.2f}", Text(_source(hit.id)), Text(hit.title[:28]), Text(_shorten(hit.text, 100)))
        console.print(table)
    for note in trace.truncations:
        console.print(Text(f"  {truncation_line(note)}", style="yellow"))
    console.print(
        Text(
            f"  {trace.method} · {trace.model} · {len(trace.retrievals)} retrievals · "
            f"{trace.generated_tokens} generated tokens · {trace.seconds:.1f} s",
            style="dim",
        )
    )
