"""Where a SeaKR answer's time goes: run any `dynrag` command (normally `eval --method seakr`) with
the sampling of hidden states wrapped, and print how many sampling calls there were, their seconds,
and the share of row-steps whose row was still writing (what dropping finished rows could save).

    python benchmarks/profile_seakr.py eval --method seakr --dataset world --data TEST.jsonl \
        --corpus INDEX --model hf:READER --limit 1 --out /tmp/seakr-prof

Run it under `python -m cProfile -o OUT.prof` for the call tree as well. It wraps the transformers
backend's sampling; benchmarks/bench_seakr_backends.py times both backends' sampling calls.
"""

from __future__ import annotations

import json
import sys
import time

import dynrag.lm.hidden as hidden

calls: list[dict[str, float]] = []
_sample_states = hidden.sample_states


def timed_sample_states(*args, **kwargs):
    started = time.perf_counter()
    out = _sample_states(*args, **kwargs)
    lengths = [len(row) + 1 for row in out.token_ids]  # + the end-of-sequence step that reads the state
    calls.append({"rows": kwargs["n"], "steps": max(lengths), "row_steps": sum(lengths),
                  "seconds": time.perf_counter() - started})
    return out


def main() -> None:
    hidden.sample_states = timed_sample_states  # the backends look it up when they sample
    from dynrag.cli import run

    sys.argv = ["dynrag", *sys.argv[1:]]
    try:
        run()
    finally:
        busy = sum(c["row_steps"] for c in calls) / max(1, sum(c["rows"] * c["steps"] for c in calls))
        print(json.dumps({"sampling_calls": len(calls), "sampling_seconds": round(sum(c["seconds"] for c in calls), 1),
                          "rows_still_writing": round(busy, 3), "steps_per_call": [c["steps"] for c in calls]}))


if __name__ == "__main__":
    main()
