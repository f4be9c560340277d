"""A markdown table of `dynrag synth` runs from their summary.json files.

    .venv/bin/python benchmarks/synth_table.py runs/synth/*
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    print("| run | dataset | teacher | match | questions | found | share | expanded/q | generations/q | retrievals on path | steps on path | s/q | questions/h |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for run in map(Path, sys.argv[1:]):
        if not (run / "summary.json").exists():
            continue
        s = json.loads((run / "summary.json").read_text())
        m = json.loads((run / "manifest.json").read_text())

        def num(v, d=2):
            return "–" if v is None else f"{v:.{d}f}"

        hist = " ".join(f"{k}:{v}" for k, v in s["retrievals_histogram"].items())
        print(f"| {run.name} | {s['dataset']} | {s['teacher']} | {m['match']} | {s['questions']} | {s['found']} | "
              f"{num(s['share_found'])} | {num(s['expanded_per_question'], 1)} | {num(s['generations_per_question'], 1)} | "
              f"{num(s['retrievals_on_optimal_path'])}{f' ({hist})' if hist else ''} | {num(s['steps_on_optimal_path'])} | "
              f"{num(s['seconds_per_question'], 0)} | {num(s['questions_per_hour'], 1)} |")


if __name__ == "__main__":
    main()
