"""DRAGIN on the llama.cpp backend (its attention read by the transformers copy of the same
weights) against DRAGIN on transformers, in one process: seconds per question, the speed ratio,
and how often the two agree on the final answer and on every retrieval query.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_dragin_backends.py --data HOTPOT_DEV.json \
        --limit 20 --model bundled:qwen2.5-0.5b --variant paper --variant reference

Questions are HotpotQA's, retrieving with BM25 from the pooled context paragraphs of the loaded
questions (as `eval --corpus contexts`), top 3. `paper` runs at its defaults; `reference` with
the settings of `reproduce dragin-table2` on HotpotQA (the authors' released Llama2-13b-chat
values). The two backends alternate which answers a question first, so neither always finds the
machine warmer.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from dynrag.datasets.loaders import load_examples
from dynrag.eval.pool import pool_contexts
from dynrag.lm import load_lm
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.registry import build_method
from dynrag.reproduce.dragin import dragin_runs
from dynrag.retrieval.bm25 import BM25Index


def variant_options(variant: str) -> dict:
    if variant == "reference":
        (run,) = dragin_runs("Llama2-13b-chat", ["hotpotqa"], ["dragin"])
        return {**run.options, "k": 3}
    return {"variant": "paper", "k": 3}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="HotpotQA JSON file")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--model", default="bundled:qwen2.5-0.5b")
    ap.add_argument("--variant", action="append", choices=["paper", "reference"])
    args = ap.parse_args()
    variants = args.variant or ["paper"]
    examples = list(load_examples("hotpotqa", args.data, limit=args.limit))
    folder = Path(tempfile.mkdtemp(prefix="bench-dragin-"))
    BM25Index.build(pool_contexts(examples), folder / "index", progress=False)
    index = BM25Index.load(folder / "index", backend="numpy")
    joiner = "&" if "?" in args.model else "?"
    backends = {
        "transformers": load_lm(args.model, progress=False),
        "llama.cpp": load_lm(f"{args.model}{joiner}backend=llama.cpp", progress=False),
    }
    backends["llama.cpp"].attention_reader()  # its transformers copy, loaded before the clock starts
    builder = PromptBuilder.for_dataset("hotpotqa")
    for variant in variants:
        methods = {name: build_method("dragin", lm, index, variant_options(variant), builder)
                   for name, lm in backends.items()}
        seconds = {name: 0.0 for name in backends}
        retrievals = {name: 0 for name in backends}
        same_answer = same_queries = 0
        for i, ex in enumerate(examples):
            order = list(methods) if i % 2 == 0 else list(reversed(methods))
            answers = {}
            for name in order:
                started = time.perf_counter()
                answers[name] = methods[name].answer(ex.question)
                seconds[name] += time.perf_counter() - started
                retrievals[name] += len(answers[name].trace.retrievals)
            fast, slow = answers["llama.cpp"], answers["transformers"]
            same_answer += fast.final_answer.strip() == slow.final_answer.strip()
            same_queries += [r.query for r in fast.trace.retrievals] == [r.query for r in slow.trace.retrievals]
        n = len(examples)
        print(f"dragin variant={variant}, {args.model}, {n} HotpotQA questions, BM25 over their pooled paragraphs")
        for name in backends:
            print(f"  {name:<13} {seconds[name] / n:6.2f} s/question  {retrievals[name] / n:4.2f} retrievals/question")
        print(f"  speed ratio (transformers s / llama.cpp s): {seconds['transformers'] / seconds['llama.cpp']:.2f}x")
        print(f"  identical final answers: {same_answer}/{n} ({same_answer / n:.2f}); "
              f"identical retrieval queries: {same_queries}/{n} ({same_queries / n:.2f})")


if __name__ == "__main__":
    main()
