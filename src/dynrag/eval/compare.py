"""`dynrag compare`: runs side by side as a markdown table, and F1 against retrievals per question.

When a `direct` (no-retrieval) run of the same data is among the runs, every other run on that
data gets DeepRAG's four knowledge-boundary figures against it (datasets/boundary.py).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from dynrag.errors import ConfigError, DataError
from dynrag.datasets.boundary import knowledge_boundary
from dynrag.datasets.loaders import dataset_spec
from dynrag.io.rundir import SUMMARY_JSON, read_config, read_predictions, run_kind, unique_by_id
from dynrag.eval.summary import summarize
from dynrag.io.files import read_json


def load_run(run_dir: Path) -> dict[str, Any]:
    """A run's summary (recomputed from predictions.jsonl when summary.json is missing)."""
    run_dir = Path(run_dir)
    path = run_dir / SUMMARY_JSON
    try:
        kind = run_kind(run_dir)
    except ConfigError as exc:
        raise DataError(str(run_dir), "not a run directory") from exc
    if kind not in ("eval", None):
        raise DataError(str(run_dir), f"a `dynrag {kind}` directory; compare reads `dynrag eval` runs")
    if path.exists():
        summary = read_json(path, "summary")
    else:
        config = read_config(run_dir)
        if config is None:
            raise DataError(str(run_dir), "not a run directory (no config.json or summary.json)")
        predictions = unique_by_id(read_predictions(run_dir))[0]
        from dynrag.eval.runner import run_scorer

        meta = {k: config.get(k) for k in ("method", "model", "dataset")}
        dataset = dataset_spec(config["dataset"])
        summary = summarize(
            predictions, any(p.get("support") for p in predictions), dataset.yes_no, meta, run_scorer(config), dataset,
        )
    config = read_config(run_dir) or {}
    return {"run": str(run_dir), "name": run_dir.name, **summary, "data_sha256": config.get("data_sha256")}


def closed_book(method: Any) -> bool:
    """Whether a run's method answers without retrieval (the knowledge-boundary baseline)."""
    from dynrag.methods.registry import METHODS, method_traits

    return isinstance(method, str) and method in METHODS and not method_traits(method).needs_retrieval


def add_direct_boundaries(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Knowledge-boundary figures of each run against a `direct` run of the same data among them
    (same dataset and data file checksum, questions joined on id); other runs are left as they are."""
    directs = {(r.get("dataset"), r.get("data_sha256")): r for r in runs if closed_book(r.get("method")) and r.get("data_sha256")}
    out = []
    for r in runs:
        base = directs.get((r.get("dataset"), r.get("data_sha256")))
        if base is not None and base is not r:
            figures = knowledge_boundary(unique_by_id(read_predictions(Path(r["run"])))[0], unique_by_id(read_predictions(Path(base["run"])))[0])
            if figures["n"]:
                r = {**r, "knowledge_boundary": {"baseline": base["run"], "baseline_method": base["method"], **figures}}
        out.append(r)
    return out


def labels(runs: list[dict[str, Any]]) -> list[str]:
    """The method name of each run, or its directory name where two runs share a method."""
    counts = Counter((r.get("method"), r.get("dataset")) for r in runs)
    return [
        str(r.get("method")) if counts[(r.get("method"), r.get("dataset"))] == 1 else r["name"] for r in runs
    ]


def _pct(value: Any) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _num(value: Any, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def markdown_table(runs: list[dict[str, Any]]) -> str:
    has_kb = any(r.get("knowledge_boundary") for r in runs)
    header = ["run", "method", "dataset", "model", "n", "EM", "F1", "Acc", "ret/q", "tok/q", "s/q", "sup. recall"]
    if has_kb:
        header += ["KB F1", "KB Acc", "KB BAcc", "KB MCC"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    for label, r in zip(labels(runs), runs):
        row = [
            label,
            str(r.get("method")),
            str(r.get("dataset")),
            f"`{r.get('model')}`",
            str(r.get("n")),
            _pct(r.get("em")),
            _pct(r.get("f1")),
            _pct(r.get("accuracy")),
            _num(r.get("retrievals_per_question")),
            _num(r.get("generated_tokens_per_question"), 1),
            _num(r.get("seconds_per_question"), 1),
            _pct(r.get("support_recall")),
        ]
        if has_kb:
            kb = r.get("knowledge_boundary") or {}
            row += [_num(kb.get("f1"), 3), _num(kb.get("accuracy"), 3), _num(kb.get("balanced_accuracy"), 3), _num(kb.get("mcc"), 3)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def plot_runs(runs: list[dict[str, Any]], path: Path) -> None:
    """Scatter of F1 (%) against retrievals per question, one labelled point per run; one colour
    per dataset when the runs span several."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=150)
    datasets = list(dict.fromkeys(str(r.get("dataset")) for r in runs))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for d_i, dataset in enumerate(datasets):
        group = [(lab, r) for lab, r in zip(labels(runs), runs) if str(r.get("dataset")) == dataset]
        xs = [float(r.get("retrievals_per_question") or 0.0) for _, r in group]
        ys = [100 * float(r.get("f1") or 0.0) for _, r in group]
        ax.scatter(xs, ys, s=42, color=colours[d_i % len(colours)], label=dataset, zorder=3, clip_on=False)
        for (lab, _), x, y in zip(group, xs, ys):
            ax.annotate(lab, (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8)
    ax.set_xlabel("retrievals per question")
    ax.set_ylabel("F1 (%)")
    models = sorted({str(r.get("model")) for r in runs})
    ax.set_title("F1 against retrieval cost" + (f" ({models[0]})" if len(models) == 1 else ""), fontsize=10)
    ax.grid(True, alpha=0.3, zorder=0)
    all_x = [float(r.get("retrievals_per_question") or 0.0) for r in runs]
    all_y = [100 * float(r.get("f1") or 0.0) for r in runs]
    # F1 and retrievals are never negative: start both axes at 0, leave room for the labels
    ax.set_xlim(-0.05 * max(1.0, max(all_x)), max(1.0, max(all_x)) * 1.2)
    ax.set_ylim(0, min(105.0, max(10.0, max(all_y) * 1.25)))
    if len(datasets) > 1:
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
