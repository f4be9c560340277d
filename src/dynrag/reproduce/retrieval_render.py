"""The markdown of a retrieval-only table: per dataset our rows with the paper's metric names, then
the paper's own cells (other data, so set side by side rather than subtracted), the cost, and the
sweep's plot when the table has one."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

from dynrag.io.files import atomic_write_bytes
from dynrag.reproduce.retrieval_tables import RetrievalTable


def _cell(value: Any, scale: float, digits: int) -> str:
    return "–" if not isinstance(value, (int, float)) else f"{value * scale:.{digits}f}"


def seconds_per_query(summary: dict[str, Any]) -> float | None:
    """Search time a question, plus the model's writing time when a query transform wrote text."""
    n = summary.get("n") or 0
    if not n or "search_seconds" not in summary:
        return None
    return (summary["search_seconds"] + (summary.get("generation_seconds") or 0.0)) / n


def render_retrieval(report: dict[str, Any]) -> str:
    table: RetrievalTable = report["table"]
    req = report["request"]
    results = report["results"]
    from dynrag.lm.loader import resolve_model

    written = f", query texts by `{resolve_model(req.model)}`" if table.needs_model else ""
    distractors = report["settings"].distractors
    lines = [
        f"# {table.title}", "",
        f"Ours: {f'the first {req.limit}' if req.limit else 'all'} questions of each dataset with a supporting passage; each dataset's "
        f"pooled context paragraphs{f' plus the passages of {distractors}' if distractors else ''}{written}. "
        f"Paper: {table.paper_setting}.", "", f"Stand-ins: {table.stand_in}",
    ]
    for ds in [*report["found"], *[d for d in report["missing"] if d not in report["found"]]]:
        lines += ["", f"## {ds}", ""]
        if ds in report["missing"]:
            lines += [f"_{report['missing'][ds]}_", ""]
            continue
        reading = any("em" in ((results.get((ds, r.key)) or {}).get("table_scores") or {}) for r in table.rows)
        ours = table.ours(reading)
        header = ["row", *(m.title for m in ours), "s/query", "n"]
        lines += ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
        for row in table.rows:
            summary = results.get((ds, row.key))
            if summary is None:
                continue
            if "error" in summary:
                lines.append(f"| {row.label} | " + " | ".join("–" for _ in ours) + " | – | – |")
                lines.append(f"| ↳ _{summary['error']}_ |" + " |" * (len(header) - 1))
                continue
            scores = summary.get("table_scores", {})
            cells = [_cell(scores.get(m.key), m.scale, m.digits) for m in ours]
            speed = seconds_per_query(summary)
            lines.append(f"| {row.label} | " + " | ".join(cells) + f" | {'–' if speed is None else f'{speed:.4f}'} | {summary.get('n', '–')} |")
        lines += claim_lines(table, ds, results)
    for paper_ds, cells in table.published.items():
        metrics = [m for m in table.metrics if m.paper]
        lines += ["", f"Published ({paper_ds}):", "",
                  "| row | " + " | ".join(m.paper_title or m.title for m in metrics) + " |", "|" + "|".join(" --- " for _ in range(len(metrics) + 1)) + "|"]
        for key, row_cells in cells.items():
            label = table.published_labels.get(key) or next((r.label for r in table.rows if r.key == key), key)
            lines.append(f"| {label} | " + " | ".join(_cell(row_cells.get(m.paper), 1.0, 2) for m in metrics) + " |")
    if not table.published:
        lines += ["", "Published: the paper's cells for this table are not typed here (see the source)."]
    cost = report.get("cost") or {}
    if cost:
        load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
        lines += ["", f"Cost of this command: {cost['seconds']:.0f} s wall, {cost['cpu_seconds']:.0f} s CPU in this process "
                      f"(load average at the end {load}); finished rows are read back, not rerun."]
    for remark in table.remarks:
        lines += ["", remark]
    lines += ["", f"Source: {table.source}"]
    return "\n".join(lines) + "\n"


def claim_lines(table: RetrievalTable, ds: str, results: dict) -> list[str]:
    """Each of the paper's claims whose two rows ran on ``ds``, with its paired test and verdict."""
    from dynrag.reproduce.claims import decide

    lines = []
    labels = {r.key: r.label for r in table.rows}
    metrics = {m.key: m for m in table.metrics if m.key}
    for claim in table.claims:
        better, worse = results.get((ds, claim.better)), results.get((ds, claim.worse))
        scores = [{q: s[claim.metric] for q, s in (row or {}).get("question_scores", {}).items() if claim.metric in s}
                  for row in (better, worse)]
        if not scores[0] or not scores[1]:
            continue
        v = decide(claim, *scores)
        scale = metrics[claim.metric].scale if claim.metric in metrics else 1.0
        lines.append(f"- {claim.text}: {labels[claim.better]} − {labels[claim.worse]} on {claim.metric} = "
                     f"{v.difference * scale:+.1f}; {v.test}, n = {v.n}, p = {v.p:.3g}: **{v.verdict}**.")
    return ["", "Claims (the paper's, tested on these questions):", "", *lines] if lines else []


def plot_sweep(report: dict[str, Any], path: Path) -> bool:
    """The table's swept setting against each of its plotted metrics, one line per dataset and
    retriever (PNG); False when the table sweeps nothing or no row has finished."""
    table: RetrievalTable = report["table"]
    if table.sweep is None:
        return False
    series: dict[str, list[tuple[float, float]]] = {}
    for (ds, key), summary in report["results"].items():
        row = next(r for r in table.rows if r.key == key)
        if not summary or "table_scores" not in summary:
            continue
        if table.sweep.over_cutoffs:
            series[f"{ds} {row.label}"] = [(float(m.split("@")[1]), summary["table_scores"][m])
                                           for m in table.sweep.metrics if m in summary["table_scores"]]
            continue
        if row.x is None:
            continue
        for metric in table.sweep.metrics:
            value = summary["table_scores"].get(metric)
            if value is not None:
                series.setdefault(f"{ds} {row.retriever} {metric}", []).append((row.x, value))
    if not series:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=130)
    for name, points in sorted(series.items()):
        points.sort()
        ax.plot([x for x, _ in points], [y for _, y in points], marker="o", label=name)
    if table.sweep.log_x:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(table.sweep.axis)
    ax.set_ylabel("share (0–1)")
    ax.set_title(table.title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())
    return True
