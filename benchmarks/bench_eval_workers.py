"""`dynrag eval` throughput on this machine's cores: one process whose torch uses every core against
one single-threaded worker process per core, on the same questions.

    .venv/bin/python benchmarks/bench_eval_workers.py --data HOTPOT_DEV.json [--limit 40] [--rounds 2] [--method single]

Each configuration is the real command (`dynrag eval --dataset hotpotqa ... --corpus contexts`,
bundled model) into a fresh run directory; the two alternate (A B A B ...) so the machine's other
load falls on both alike. Questions per minute are end to end (model load included: what a user
waits for). The answers of the two are compared: greedy decoding with another thread count may
round differently, so a few may differ.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run(name: str, workers: int, threads: int, args, out: Path) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    cmd = [str(REPO / ".venv/bin/dynrag"), "eval", "--dataset", "hotpotqa", "--data", args.data,
           "--method", args.method, "--corpus", "contexts", "--limit", str(args.limit), "--no-progress",
           "--workers", str(workers), "--out", str(out)]
    before = load_average()
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"{name} failed:\n{done.stderr}")
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    return {"name": name, "workers": workers, "threads": threads, "wall": wall, "n": len(predictions),
            "em": summary["em"], "f1": summary["f1"], "load_before": before, "load_after": load_average(),
            "answers": {p["id"]: p["prediction"] for p in predictions}, "cmd": " ".join(cmd[1:])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="HotpotQA JSON file")
    ap.add_argument("--limit", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--method", default="single")
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    configs = [(f"1 process x {cores} threads", 1, cores), (f"{cores} processes x 1 thread", cores, 1)]
    print(f"# eval throughput: {args.limit} HotpotQA questions, method {args.method}, {cores} cores, "
          f"load average at start {load_average()}", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-eval-workers-") as tmp:
        for r in range(args.rounds):
            for name, workers, threads in (configs if r % 2 == 0 else configs[::-1]):
                out = Path(tmp) / f"{r}-{workers}"
                res = run(name, workers, threads, args, out)
                results.append(res)
                print(f"round {r + 1}: {name}: {res['n']} questions in {res['wall']:.0f} s = "
                      f"{60 * res['n'] / res['wall']:.2f} q/min (load {res['load_before']} -> {res['load_after']})",
                      flush=True)
    print()
    print("| configuration | runs | questions | wall s (sum) | questions/minute | EM | F1 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    rate = {}
    for name, workers, _ in configs:
        mine = [r for r in results if r["workers"] == workers]
        n = sum(r["n"] for r in mine)
        wall = sum(r["wall"] for r in mine)
        rate[workers] = 60 * n / wall
        print(f"| {name} | {len(mine)} | {n} | {wall:.0f} | {rate[workers]:.2f} | "
              f"{100 * mine[0]['em']:.1f} | {100 * mine[0]['f1']:.1f} |")
    a, b = results[0]["answers"], next(r for r in results if r["workers"] == cores)["answers"]
    same = sum(a[i] == b.get(i) for i in a)
    print()
    print(f"ratio: {cores} processes x 1 thread / 1 process x {cores} threads = {rate[cores] / rate[1]:.2f}x "
          f"questions per minute (sums over {args.rounds} alternating rounds)")
    print(f"identical predictions between the two: {same} of {len(a)}")
    print(f"commands: dynrag {results[0]['cmd']} (OMP_NUM_THREADS={cores}) and the same with --workers {cores} "
          f"(OMP_NUM_THREADS=1); load average at end {load_average()}")


if __name__ == "__main__":
    main()
