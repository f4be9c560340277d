"""A markdown table of finished `dynrag eval-retrieval` runs, one row per run directory.

Columns: n, recall@K and support_all@K for every K the runs share, MRR, queries/s of the search,
and for HyDE runs queries/s counting the model's writing time. Optionally the change of one metric
against a reference row (``--against bm25-plain``), which is how the HyDE sweep is read.

    .venv/bin/python benchmarks/retrieval_table.py runs/hyde-sweep/hotpotqa/* --against bm25-plain
    .venv/bin/python benchmarks/retrieval_table.py runs/hyde-sweep/hotpotqa/* --paired plain,hyde
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def load(run_dir: Path) -> dict:
    path = run_dir / "summary.json"
    if not path.is_file():
        raise SystemExit(f"{run_dir}: no summary.json (not a finished eval-retrieval run)")
    return json.loads(path.read_text(encoding="utf-8"))


def table(runs: dict[str, dict], against: str | None, metric: str) -> str:
    ks = sorted(set.intersection(*(set(s["k"]) for s in runs.values())))
    head = ["run", "n"] + [f"recall@{k}" for k in ks] + [f"support_all@{k}" for k in ks] + ["MRR", "q/s search"]
    with_generation = any("queries_per_second_with_generation" in s for s in runs.values())
    if with_generation:
        head.append("q/s with HyDE writing")
    if against:
        if against not in runs:
            raise SystemExit(f"--against {against}: no such run (runs: {', '.join(runs)})")
        head.append(f"{metric} vs {against}")
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    for name, s in runs.items():
        cells = [name, str(s["n"])]
        cells += [f"{s[f'recall@{k}']:.3f}" for k in ks] + [f"{s[f'support_all@{k}']:.3f}" for k in ks]
        cells += [f"{s['mrr']:.3f}", f"{s['queries_per_second']:.1f}"]
        if with_generation:
            q = s.get("queries_per_second_with_generation")
            cells.append(f"{q:.2f}" if q is not None else "–")
        if against:
            cells.append(f"{s[metric] - runs[against][metric]:+.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def paired_table(runs: dict[str, dict], without: str, with_: str) -> str:
    """One row per retriever from runs named NAME-<without> and NAME-<with_> (e.g. bm25-plain and
    bm25-hyde): each metric without and with the query transform side by side."""
    names = [n[: -len(without) - 1] for n in runs if n.endswith("-" + without) and n[: -len(without)] + with_ in runs]
    if not names:
        raise SystemExit(f"no pairs of runs named NAME-{without} / NAME-{with_}")
    head = ["retriever", "n", "recall@3", f"+{with_}", "recall@10", f"+{with_}", "support_all@10", f"+{with_}",
            "q/s", f"q/s +{with_} (search)", f"q/s +{with_} (with writing)"]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    for name in names:
        a, b = runs[f"{name}-{without}"], runs[f"{name}-{with_}"]
        cells = [name, str(a["n"])]
        for metric in ("recall@3", "recall@10", "support_all@10"):
            cells += [f"{a[metric]:.3f}", f"{b[metric]:.3f} ({b[metric] - a[metric]:+.3f})"]
        q = b.get("queries_per_second_with_generation")
        cells += [f"{a['queries_per_second']:.1f}", f"{b['queries_per_second']:.1f}", f"{q:.2f}" if q else "–"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="eval-retrieval output directories")
    ap.add_argument("--against", help="run directory name to compare every row with")
    ap.add_argument("--metric", default="recall@3", help="metric of the --against column (default recall@3)")
    ap.add_argument("--paired", metavar="WITHOUT,WITH",
                    help="pair runs NAME-WITHOUT / NAME-WITH into one row each (e.g. plain,hyde)")
    args = ap.parse_args()
    runs = {d.name: load(d) for d in args.runs if d.is_dir() and not d.name.endswith("contexts-index")}
    if not runs:
        raise SystemExit("no run directories given")
    if args.paired:
        without, _, with_ = args.paired.partition(",")
        print(paired_table(runs, without, with_), end="")
    else:
        print(table(runs, args.against, args.metric), end="")


if __name__ == "__main__":
    main()
