"""Dynamic methods side by side from finished `dynrag eval` run directories, on the questions
they share: accuracy, retrievals, tokens decoded vs kept (the waste ratio) and seconds per
question relative to a reference run (default: the one whose method is `single`).

Cheaper than bench_dynamic.py when the eval runs exist anyway (as for LOG.md's six-method
comparison): nothing is re-generated, the figures are recomputed from each run's predictions.jsonl.

    .venv/bin/python benchmarks/dynamic_from_runs.py runs/compare/hotpotqa/* --first 50
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dynrag.datasets.loaders import dataset_spec
from dynrag.io.rundir import read_config, read_predictions
from dynrag.eval.summary import summarize


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--first", type=int, default=50, help="the first N questions all runs share")
    ap.add_argument("--reference", default="single", help="run directory name to divide latency by")
    args = ap.parse_args()
    runs = {}
    for run_dir in args.runs:
        config = read_config(run_dir)
        if config is None:
            continue  # a log file or anything else the glob caught
        runs[run_dir.name] = (config, read_predictions(run_dir))
    if args.reference not in runs:
        raise SystemExit(f"no run named {args.reference!r} among {sorted(runs)}")
    order = [p["id"] for p in runs[args.reference][1]]
    shared = set(order).intersection(*({p["id"] for p in preds} for _, preds in runs.values()))
    keep = [i for i in order if i in shared][: args.first]
    keep_set = set(keep)
    print(f"{len(keep)} questions shared by {len(runs)} runs ({', '.join(runs)})")
    print(f"| run | method | n | EM | F1 | ret/q | decoded/q | kept/q | decoded/kept | s/q | × {args.reference} |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    summaries = {}
    for name, (config, preds) in runs.items():
        subset = [p for p in preds if p["id"] in keep_set]
        dataset = dataset_spec(config["dataset"])
        summary = summarize(subset, any(p.get("support") for p in subset), dataset.yes_no, dataset=dataset)
        summary["kept_per_question"] = sum(p.get("kept_tokens", p["generated_tokens"]) for p in subset) / len(subset)
        summaries[name] = (config, summary)
    ref_seconds = summaries[args.reference][1]["seconds_per_question"]
    for name, (config, s) in summaries.items():
        kept = s["kept_per_question"]
        print(f"| {name} | {config['method']} | {s['n']} | {s['em']:.3f} | {s['f1']:.3f} | {s['retrievals_per_question']:.2f} "
              f"| {s['generated_tokens_per_question']:.1f} | {kept:.1f} | {s['decoded_per_kept']:.3f} "
              f"| {s['seconds_per_question']:.2f} | {s['seconds_per_question'] / ref_seconds:.2f} |")


if __name__ == "__main__":
    main()
