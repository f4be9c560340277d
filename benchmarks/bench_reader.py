"""Which bundled model reads better? Both answer the same HotpotQA questions with the gold
(supporting) paragraphs in the prompt, and closed-book, with the project's shared prompt builder.

    .venv/bin/python benchmarks/bench_reader.py --data HOTPOT_DEV.json --limit 40
"""

from __future__ import annotations

import argparse
import time

from dynrag.datasets.loaders import load_examples
from dynrag.datasets.metrics import score_answer
from dynrag.lm import load_lm
from dynrag.methods.answering import answer_once
from dynrag.methods.base import Trace
from dynrag.methods.prompting import PromptBuilder
from dynrag.retrieval.base import Hit


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="HotpotQA JSON file (questions with their gold paragraphs)")
    ap.add_argument("--limit", type=int, default=40)
    ap.add_argument("--models", default="bundled:smollm2,bundled:gemma3-270m")
    ap.add_argument("--settings", default="gold,closed-book")
    args = ap.parse_args()
    examples = list(load_examples("hotpotqa", args.data, limit=args.limit))
    builder = PromptBuilder.for_dataset("hotpotqa")
    print(f"{len(examples)} HotpotQA questions; gold = the supporting paragraphs in the prompt", flush=True)
    print(f"{'model':<22}{'setting':<13}{'EM':>7}{'F1':>7}{'s/q':>7}", flush=True)
    for spec in args.models.split(","):
        lm = load_lm(spec, progress=False)
        for setting in args.settings.split(","):
            em = f1 = 0.0
            started = time.perf_counter()
            for ex in examples:
                by_id = {p.id: p for p in ex.contexts}
                hits = [Hit(p.id, p.title, p.text, 1.0) for p in (by_id[i] for i in ex.supporting)]
                trace = Trace(ex.question, "reader", lm.name)
                answer = answer_once(lm, builder, trace, ex.question, hits if setting == "gold" else None,
                                     96, time.perf_counter())
                s = score_answer(answer.final_answer, answer.text, ex.answers)
                em += s.em
                f1 += s.f1
            n = len(examples)
            print(f"{spec:<22}{setting:<13}{em / n:>7.3f}{f1 / n:>7.3f}{(time.perf_counter() - started) / n:>7.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
