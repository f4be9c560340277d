"""Which demo questions show DRAGIN at work with a given model: each of the 30 demo questions
answered closed book (direct), with one retrieval (single) and by dragin, at the quick demo's
budgets (demo.QUICK_OPTIONS). The quick demo's three questions are ones where closed book is wrong
and dragin retrieves and answers right.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/pick_demo_questions.py bundled:qwen2.5-0.5b picks.jsonl [ID ...]

One JSON line a question (resumable: questions already in the file are skipped), only the IDs given
when there are any; progress on stderr.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from rich.console import Console

from dynrag.data import load_demo_questions
from dynrag.datasets.metrics import score_answer
from dynrag.demo import QUICK_OPTIONS, demo_plans
from dynrag.lm import load_lm
from dynrag.retrieval.demo_index import ensure_demo_index
from dynrag.run.assemble import make_method


def main(spec: str, out: Path, only: set[str]) -> None:
    done = {json.loads(line)["id"] for line in out.read_text().splitlines()} if out.exists() else set()
    console = Console(stderr=True)
    plans = demo_plans(spec, QUICK_OPTIONS)
    index = ensure_demo_index(console)
    lm = load_lm(spec)
    methods = {name: make_method(plan, lm, index) for name, plan in plans.items()}
    for q in load_demo_questions():
        if q.id in done or (only and q.id not in only):
            continue
        row: dict = {"id": q.id, "hops": q.hops}
        for name, method in methods.items():
            started = time.perf_counter()
            answer = method.answer(q.question)
            row[name] = {"em": score_answer(answer.final_answer, answer.text, q.answers).em,
                         "final": answer.final_answer, "retrievals": len(answer.trace.retrievals),
                         "seconds": round(time.perf_counter() - started, 1)}
        with out.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        print(q.id, {name: (row[name]["em"], row[name]["retrievals"]) for name in methods}, file=sys.stderr, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), set(sys.argv[3:]))
