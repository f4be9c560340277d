"""The DeepRAG comparison table from eval run directories: EM, F1, retrievals and seconds per
question, and the four knowledge-boundary figures against a `direct` run — all over the questions
every run answered (or the first N of them), so runs of different lengths compare on the same set.

    .venv/bin/python benchmarks/deeprag_table.py --direct runs/deeprag/2wikimultihopqa/direct \
        runs/deeprag/2wikimultihopqa/{single,dragin,deeprag,deeprag-imi,deeprag-coc} [--first 30]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dynrag.datasets.boundary import knowledge_boundary
from dynrag.io.rundir import read_config, read_predictions


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--direct", type=Path, required=True, help="the no-retrieval run")
    ap.add_argument("runs", type=Path, nargs="+")
    ap.add_argument("--first", type=int, default=None, help="only the first N common questions (direct's order)")
    args = ap.parse_args()
    direct = read_predictions(args.direct)
    runs = {run: read_predictions(run) for run in args.runs}
    common = set.intersection({p["id"] for p in direct}, *({p["id"] for p in preds} for preds in runs.values()))
    order = [p["id"] for p in direct if p["id"] in common][: args.first]
    keep = set(order)
    base = [p for p in direct if p["id"] in keep]
    print(f"{len(order)} questions answered by every run\n")
    print("| run | model | EM | F1 | ret/q | s/q | KB F1 | KB acc | KB bal. acc | KB MCC |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for run, preds in [(args.direct, direct), *runs.items()]:
        rows = [p for p in preds if p["id"] in keep]
        n = len(rows)
        config = read_config(run) or {}
        kb = knowledge_boundary(rows, base) if run != args.direct else None
        cells = [
            run.name, f"`{config.get('model', '?')}`",
            f"{100 * sum(p['em'] for p in rows) / n:.1f}", f"{100 * sum(p['f1'] for p in rows) / n:.1f}",
            f"{sum(p['retrievals'] for p in rows) / n:.2f}", f"{sum(p['seconds'] for p in rows) / n:.1f}",
        ]
        cells += [f"{kb[k]:.3f}" for k in ("f1", "accuracy", "balanced_accuracy", "mcc")] if kb else ["–"] * 4
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
