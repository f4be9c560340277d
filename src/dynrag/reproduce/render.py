"""The markdown ``dynrag reproduce`` prints: per dataset, our figure beside the published one and
their difference, cell by cell."""

from __future__ import annotations

from typing import Any

from dynrag.reproduce.runs import ReproduceRequest
from dynrag.reproduce.tables import Table, summary_figure


def _fmt(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _delta(ours: float | None, paper: float | None, digits: int) -> str:
    return "–" if ours is None or paper is None else f"{ours - paper:+.{digits}f}"


def _method_title(table: Table, req: ReproduceRequest, cols: list) -> str:
    """The first header cell; it says so when the Δ columns set our `contexts` pool (each dataset's
    own paragraphs) against a paper that retrieved from another corpus."""
    if req.corpus == "contexts" and table.paper_corpus and any(c.ours and c.paper for c in cols):
        return f"method (Δ: our `contexts` pool vs the paper's {table.paper_corpus})"
    return "method"


def render(report: dict[str, Any]) -> str:
    """Markdown: per dataset, our figure, the published one and the difference, cell by cell."""
    return "\n".join(render_lines(report)) + "\n"


def render_lines(report: dict[str, Any]) -> list[str]:
    """``render``'s lines; its claim lines are ``ClaimLine``s, which the run's result record reads."""
    table: Table = report["table"]
    req: ReproduceRequest = report["request"]
    results = report["results"]
    from dynrag.lm.loader import resolve_model

    # A table without any published column (a figure given as bars, a generated world) has no Δ.
    compared = any(c.paper for ds in table.datasets for c in table.columns(ds))
    shown = report.get("datasets", table.datasets)
    scorers = ", ".join(dict.fromkeys(s.scorer or table.scorer for s in table.runs if s.dataset in shown)) or table.scorer
    lines = [
        f"# {table.title}" + (": ours beside the published numbers" if compared else ""),
        "",
        f"Ours: model `{resolve_model(req.model)}`, retriever {req.retriever or 'default (bm25; hybrid for presets)'}, "
        f"corpus {req.corpus}, {f'first {req.limit}' if req.limit else 'all'} questions"
        f"{f' (shard {req.shard})' if req.shard else ''}, scorer {scorers}. "
        f"Paper: {table.paper_setting}." + (" Δ = ours − paper." if compared else ""),
        *(["", *report["tuned"]] if report.get("tuned") else []),
    ]
    for ds in shown:
        specs = [s for s in table.runs if s.dataset == ds]
        cols = table.columns(ds)
        lines += ["", f"## {ds}", ""]
        if ds in report["missing"]:
            typed = "published numbers only" if table.published_cells.get(ds) else "its published cells are not typed here either"
            lines += [f"_{report['missing'][ds]}_: {typed}.", ""]
        header = [_method_title(table, req, cols)]
        ours = " ours" if any(c.paper for c in cols) else ""  # no published column: nothing to tell apart
        for c in cols:
            header += [f"{c.title}{ours}"] if c.ours else []
            header += [f"{c.title} paper"] if c.paper else []
            header += [f"{c.title} Δ"] if c.ours and c.paper else []
        lines += ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
        n_seen = set()
        for spec in specs:
            summary = results.get((ds, spec.key))
            if summary:
                n_seen.add(summary.get("n"))
            paper_row = table.published_cells.get(ds, {}).get(spec.key, {})
            row = [spec.label]
            for c in cols:
                ours = summary_figure(summary, c.ours) if (summary and c.ours) else None
                paper = paper_row.get(c.paper) if c.paper else None
                row += [_fmt(ours, c.digits)] if c.ours else []
                row += [_fmt(paper, c.digits)] if c.paper else []
                row += [_delta(ours, paper, c.digits)] if c.ours and c.paper else []
            lines.append("| " + " | ".join(row) + " |")
        if n_seen - {None}:
            lines += ["", f"Our questions: {', '.join(str(n) for n in sorted(n_seen - {None}))}."]
    if table.after is not None:
        lines += table.after(results)
    for remark in table.remarks + [table.dataset_remarks[ds] for ds in shown if ds in table.dataset_remarks]:
        lines += ["", remark]
    lines += ["", *(f"Source: {n}" for n in table.notes)]
    return lines
