"""Dynamic methods side by side on the same questions, in one process: accuracy, retrievals,
tokens decoded vs kept (waste), and latency relative to `single`.

`dragin-reference-behaviour` is DRAGIN with early_stop=false: it decodes a full chunk and throws
away what follows the trigger, as the authors' code does. Its waste ratio is the one to compare.

    .venv/bin/python benchmarks/bench_dynamic.py --limit 50 [--theta 0.1] [--methods ...]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from dynrag.eval.loaders import load_examples
from dynrag.eval.metrics import score_answer
from dynrag.eval.pool import pool_contexts
from dynrag.lm import load_lm
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.registry import build_method
from dynrag.retrieval.bm25 import BM25Index

DEFAULT_RUNS = {
    "single": ("single", {}),
    "dragin": ("dragin", {}),
    "dragin-reference-behaviour": ("dragin", {"early_stop": False}),
    "flare": ("flare", {}),
    "fixed_sentence": ("fixed_sentence", {}),
    "fixed_length": ("fixed_length", {}),
    "dragin-reference-variant": ("dragin", {"variant": "reference"}),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="../shared/data/hotpotqa/hotpot_dev_distractor_sample.json")
    ap.add_argument("--dataset", default="hotpotqa")
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--model", default="bundled")
    ap.add_argument("--runs", default=",".join(DEFAULT_RUNS))
    ap.add_argument("--option", action="append", default=[], help="RUN:KEY=VALUE, e.g. dragin:theta=0.1")
    args = ap.parse_args()
    runs = {name: (DEFAULT_RUNS[name][0], dict(DEFAULT_RUNS[name][1])) for name in args.runs.split(",")}
    for item in args.option:
        run, _, pair = item.partition(":")
        key, _, value = pair.partition("=")
        runs[run][1][key] = value
    examples = list(load_examples(args.dataset, args.data, limit=args.limit))
    with tempfile.TemporaryDirectory() as tmp:
        BM25Index.build(pool_contexts(examples), Path(tmp) / "idx", progress=False)
        index = BM25Index.load(Path(tmp) / "idx")
        lm = load_lm(args.model, progress=False)
        builder = PromptBuilder.for_dataset(args.dataset)
        n = len(examples)
        print(f"{n} {args.dataset} questions, model {lm.name}, pooled-contexts BM25 index, options {args.option}")
        print(f"{'run':<28}{'EM':>6}{'F1':>6}{'ret/q':>7}{'decoded/q':>10}{'kept/q':>8}{'waste':>7}{'s/q':>7}"
              f"{'x single':>9}", flush=True)
        single_seconds = None
        for name, (method_name, options) in runs.items():
            method = build_method(method_name, lm, index, options, builder)
            r = dict(em=0.0, f1=0.0, retrievals=0, decoded=0, kept=0)
            started = time.perf_counter()
            for ex in examples:
                answer = method.answer(ex.question)
                s = score_answer(answer.final_answer, answer.text, ex.answers)
                r["em"] += s.em
                r["f1"] += s.f1
                r["retrievals"] += len(answer.trace.retrievals)
                r["decoded"] += answer.trace.generated_tokens
                r["kept"] += answer.trace.kept_tokens
            seconds = time.perf_counter() - started
            if name == "single":
                single_seconds = seconds
            waste = r["decoded"] / r["kept"] if r["kept"] else float("nan")
            rel = f"{seconds / single_seconds:.2f}" if single_seconds else "-"
            print(f"{name:<28}{r['em'] / n:>6.3f}{r['f1'] / n:>6.3f}{r['retrievals'] / n:>7.2f}"
                  f"{r['decoded'] / n:>10.1f}{r['kept'] / n:>8.1f}{waste:>7.3f}{seconds / n:>7.1f}{rel:>9}",
                  flush=True)


if __name__ == "__main__":
    main()
