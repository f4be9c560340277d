"""The in-process llama.cpp backend against the transformers backend on the same GGUF weights, in
one process: seconds per answer, decoded tokens per second, and the share of identical answers.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_llama_cpp.py --data HOTPOT_DEV.json \
        --limit 20 --model bundled:qwen2.5-0.5b

A checkpoint `dynrag train` made from a bundled model works too (`--model hf:CKPT`): its llama.cpp
side is the GGUF export of the same weights (Q8_0 matrices), so the ratio is what moving a trained
row to llama.cpp gains.

Each question's prompt (its gold paragraphs, the model's own prompt style) is answered greedily by
both backends, alternating which goes first so neither always finds the machine warmer. For a
bundled model the transformers backend runs on the float32 copy dequantised from the same file, so
the answers differ only where quantised arithmetic moves the argmax.
"""

from __future__ import annotations

import argparse
import time

from dynrag.datasets.loaders import load_examples
from dynrag.lm import load_lm
from dynrag.methods.prompting import ANSWER_STOPS, PromptBuilder
from dynrag.retrieval.base import Hit


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="HotpotQA JSON file")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--model", default="bundled:smollm2")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    args = ap.parse_args()
    examples = list(load_examples("hotpotqa", args.data, limit=args.limit))
    builder = PromptBuilder.for_dataset("hotpotqa")
    joiner = "&" if "?" in args.model else "?"
    backends = {
        "transformers": load_lm(args.model, progress=False),
        "llama.cpp": load_lm(f"{args.model}{joiner}backend=llama.cpp", progress=False),
    }
    seconds = {name: 0.0 for name in backends}
    tokens = {name: 0 for name in backends}
    same = 0
    for i, ex in enumerate(examples):
        by_id = {p.id: p for p in ex.contexts}
        hits = [Hit(p.id, p.title, p.text, 1.0) for p in (by_id[j] for j in ex.supporting)]
        order = list(backends) if i % 2 == 0 else list(reversed(backends))
        texts = {}
        for name in order:
            lm = backends[name]
            prompt = builder.build(ex.question, hits, lm=lm, max_new_tokens=args.max_new_tokens)
            started = time.perf_counter()
            gen = lm.generate(prompt, args.max_new_tokens, stop=ANSWER_STOPS)
            seconds[name] += time.perf_counter() - started
            tokens[name] += gen.decoded_tokens
            texts[name] = gen.text.strip()
        same += texts["transformers"] == texts["llama.cpp"]
    n = len(examples)
    style = backends["llama.cpp"].prompt_style
    print(f"{args.model} ({style} prompts), {n} HotpotQA questions with gold paragraphs, greedy, "
          f"<= {args.max_new_tokens} new tokens")
    for name in backends:
        print(f"  {name:<13} {seconds[name] / n:6.2f} s/answer  {tokens[name] / seconds[name]:6.1f} tok/s (decoded tokens over the whole call, prefill included)")
    print(f"  speed ratio (transformers s / llama.cpp s): {seconds['transformers'] / seconds['llama.cpp']:.2f}x")
    print(f"  identical answers: {same}/{n} ({same / n:.2f})")


if __name__ == "__main__":
    main()
