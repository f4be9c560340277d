"""What a tune shows: the trials table, the best trial and whether it sits at the edge of the
space, the Pareto front of the metric against ``--also``, a plot of the metric against each
parameter (report.md, tune.png) and best.yaml, a run configuration ``dynrag eval --config`` takes
as it is."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from rich.console import Console
from rich.text import Text

from dynrag.io.files import atomic_write_bytes, atomic_write_text
from dynrag.tune.figures import direction
from dynrag.tune.space import Param, key
from dynrag.tune.tuned import write_tuned

if TYPE_CHECKING:
    import optuna

REPORT_MD, PLOT_PNG, BEST_YAML = "report.md", "tune.png", "best.yaml"
DROPPED_FROM_BEST = ("out", "limit", "baseline")  # a tune's dev slice and its run directory are not the tuned run


def trial_rows(study: "optuna.Study") -> list[dict[str, Any]]:
    """One row per trial that counts (complete or pruned), in trial order."""
    rows = []
    for t in study.get_trials(deepcopy=False):
        if t.state.name not in ("COMPLETE", "PRUNED"):
            continue
        last = max(t.intermediate_values) if t.intermediate_values else None
        value = t.value if t.state.name == "COMPLETE" else (t.intermediate_values[last] if last is not None else None)
        rows.append({"number": t.number, "state": t.state.name.lower(), "params": dict(t.params), "value": value,
                     "also": t.user_attrs.get("also"), "answered": t.user_attrs.get("answered"),
                     "run_dir": t.user_attrs.get("run_dir")})
    return rows


def pareto_front(rows: list[dict[str, Any]], maximize: tuple[bool, bool]) -> list[int]:
    """Numbers of the complete trials no other complete trial beats on both figures (pure)."""
    done = [r for r in rows if r["state"] == "complete" and r["value"] is not None and r["also"] is not None]

    def better_or_equal(a: float, b: float, up: bool) -> bool:
        return a >= b if up else a <= b

    front = []
    for r in done:
        dominated = any(
            better_or_equal(o["value"], r["value"], maximize[0]) and better_or_equal(o["also"], r["also"], maximize[1])
            and (o["value"], o["also"]) != (r["value"], r["also"])
            for o in done
        )
        if not dominated:
            front.append(r["number"])
    return front


def best_row(rows: list[dict[str, Any]], up: bool, also_up: bool | None) -> dict[str, Any] | None:
    """The complete trial best on the metric; among equals, the one best on ``--also`` (when given),
    then the earliest (pure)."""
    done = [r for r in rows if r["state"] == "complete" and r["value"] is not None]
    if not done:
        return None

    def rank(r: dict[str, Any]) -> tuple[float, float, int]:
        also = r["also"] if also_up is not None and r["also"] is not None else 0.0
        return (r["value"] if up else -r["value"], also if also_up else -also, -r["number"])

    return max(done, key=rank)


def edge_notes(best: dict[str, Any], params: list[Param]) -> list[str]:
    """A plain line for each numeric parameter whose best value is an end of its range."""
    notes = []
    for p in params:
        value = best["params"].get(key(p))
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        numbers = [c for c in p.choices if isinstance(c, (int, float))] if p.kind == "list" else []
        low, high = (min(numbers), max(numbers)) if numbers else (p.low, p.high)
        if p.kind != "list" and p.grid():
            high = p.grid()[-1]
        if low is None or high is None or low == high:
            continue
        tolerance = 1e-9 * max(1.0, abs(high - low))
        for end, which in ((low, "low"), (high, "high")):
            if abs(value - end) <= tolerance:
                notes.append(f"The best {key(p)} ({value:g}) is at the {which} end of the space ({p.describe()}): "
                             f"the best value may lie beyond it; widen the range to find out.")
    return notes


def tie_note(rows: list[dict[str, Any]], metric: str) -> str | None:
    """A plain line when two or more trials ran in full and all have the same figure (pure): then
    whichever is called best won a tie, so an end of the range it sits at tells nothing."""
    values = [r["value"] for r in rows if r["state"] == "complete" and r["value"] is not None]
    if len(values) < 2 or len(values) < len(rows) or any(v != values[0] for v in values):
        return None  # a pruned trial fell behind: not every trial tied
    trials = "Both trials" if len(values) == 2 else f"All {len(values)} trials"
    return (f"{trials} tied at {metric} {_fmt(values[0])}: the ends of the range say nothing "
            f"about where the best value lies; more dev questions may tell the trials apart.")


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def markdown(rows: list[dict[str, Any]], params: list[Param], metric: str, also: str | None, best: dict | None,
             notes: list[str], front: list[int], budget: int) -> str:
    names = [key(p) for p in params]
    lines = [f"# dynrag tune: {metric}", "",
             f"{len(rows)} of {budget} trials ({sum(r['state'] == 'pruned' for r in rows)} pruned); "
             f"questions answered in all: {sum(int(r['answered'] or 0) for r in rows)}.", ""]
    if best is not None:
        shown = ", ".join(f"{k}={_fmt(v)}" for k, v in best["params"].items())
        lines += [f"Best: trial {best['number']}, {metric} {_fmt(best['value'])} at {shown} (best.yaml).", ""]
    lines += [*notes, ""] if notes else []
    head = ["trial", "state", *names, metric, *([also] if also else []), "questions", "run"]
    lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        cells = [str(r["number"]), r["state"] + (" (front)" if r["number"] in front else ""),
                 *(_fmt(r["params"].get(n)) for n in names), _fmt(r["value"]), *([_fmt(r["also"])] if also else []),
                 _fmt(r["answered"]), str(r["run_dir"] or "–")]
        lines.append("| " + " | ".join(cells) + " |")
    if also:
        lines += ["", f"Pareto front ({metric} against {also}): trials {', '.join(map(str, front)) or 'none'}."]
    lines += ["", f"![{metric} against each parameter]({PLOT_PNG})"]
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], params: list[Param], metric: str, path: Path) -> None:
    """One panel per parameter: the metric of each complete trial (pruned ones hollow, at their
    last reported figure) against the parameter's value."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(params), figsize=(4.2 * len(params), 3.4), dpi=130, squeeze=False)
    for ax, p in zip(axes[0], params):
        for state, face in (("complete", "C0"), ("pruned", "none")):
            pts = sorted((r["params"][key(p)], r["value"]) for r in rows
                         if r["state"] == state and r["value"] is not None and key(p) in r["params"])
            if pts:
                xs = [x if _numeric(p) else str(x) for x, _ in pts]
                ax.scatter(xs, [y for _, y in pts], facecolors=face, edgecolors="C0", label=state, zorder=3)
        if p.log:
            ax.set_xscale("log")
        ax.set_xlabel(key(p))
        ax.set_ylabel(metric)
        ax.grid(True, alpha=0.3, zorder=0)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def _numeric(p: Param) -> bool:
    return p.kind != "list" or all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in p.choices)


def best_config(run_dir: Path, best: dict[str, Any], metric: str) -> str:
    """best.yaml: the best trial's config.yaml without its run directory and dev-slice limit."""
    config = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    for k in DROPPED_FROM_BEST:
        config.pop(k, None)
    head = f"# dynrag tune: trial {best['number']}, {metric} {_fmt(best['value'])}; run with dynrag eval --config\n"
    return head + yaml.safe_dump(config, sort_keys=False, allow_unicode=True)


def write_outputs(study: "optuna.Study", settings: Any, params: list[Param], out: Path, budget: int,
                  console: Console) -> dict[str, Any]:
    rows = trial_rows(study)
    up = direction(settings.metric) == "maximize"
    best = best_row(rows, up, direction(settings.also) == "maximize" if settings.also else None)
    tie = tie_note(rows, settings.metric)
    notes = [tie] if tie else edge_notes(best, params) if best else []
    front = pareto_front(rows, (up, direction(settings.also) == "maximize")) if settings.also else []
    text = markdown(rows, params, settings.metric, settings.also, best, notes, front, budget)
    if rows:
        plot(rows, params, settings.metric, out / PLOT_PNG)
    atomic_write_text(out / REPORT_MD, text)
    if best is not None and best["run_dir"] and (out / best["run_dir"] / "config.yaml").is_file():
        atomic_write_text(out / BEST_YAML, best_config(out / best["run_dir"], best, settings.metric))
        write_tuned(out, settings.run["method"], dict(settings.run.get("options") or {}), best["params"],
                    best["number"], settings.metric, best["value"])
        console.print(Text(f"wrote {out / BEST_YAML} ({settings.metric} {_fmt(best['value'])}, trial {best['number']})"),
                      soft_wrap=True)
    for note in notes:
        console.print(Text(note), soft_wrap=True)
    return {"rows": rows, "best": best, "notes": notes, "front": front, "markdown": text}
