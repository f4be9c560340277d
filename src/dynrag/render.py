"""Terminal rendering of answers and their traces (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dynrag.methods.base import Answer


def _shorten(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def render_answer(console: Console, answer: Answer, gold: list[str] | None = None) -> None:
    trace = answer.trace
    console.print(Text.assemble(("Q ", "bold cyan"), trace.question))
    final = Text.assemble(("A ", "bold green"), (answer.final_answer or "(no answer)", "bold"))
    if gold is not None:
        final.append(f"   gold: {' / '.join(gold)}", style="dim")
    console.print(final)
    console.print(Text(_shorten(answer.text, 400), style="dim"))
    for n, retrieval in enumerate(trace.retrievals, 1):
        console.print(
            Text.assemble(
                (f"  retrieval {n}", "bold magenta"),
                (f" after {retrieval.position} tokens" if retrieval.position else " before generation", "dim"),
                ("  query: ", "dim"),
                _shorten(retrieval.query, 120),
            )
        )
        table = Table(show_header=False, box=None, padding=(0, 1), pad_edge=False)
        table.add_column(justify="right", style="yellow", no_wrap=True)
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        for hit in retrieval.hits:
            table.add_row(f"{hit.score:6.2f}", hit.title[:28], _shorten(hit.text, 110))
        console.print(table)
    console.print(
        Text(
            f"  {trace.method} · {trace.model} · {len(trace.retrievals)} retrievals · "
            f"{trace.generated_tokens} generated tokens · {trace.seconds:.1f} s",
            style="dim",
        )
    )
