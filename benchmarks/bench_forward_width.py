"""What one forward pass costs when it feeds 1, 2, ... new tokens after a long cached prompt: the
figure behind prompt-lookup decoding's rule of never checking a draft of under 3 tokens
(lm/lookup.py). Prints the median milliseconds of each width and its ratio to one token.

With ``--batches`` it measures instead one decode step (one new token per row) for 1, 2, 4, ...
rows at once, each row with a cache of each ``--contexts`` length: the figure the batching engine
(lm/batching.py) rests on, tokens a second at batch B against batch 1.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_forward_width.py [--model bundled] [--context 900]
    .venv/bin/python benchmarks/bench_forward_width.py --batches 1,2,4,8,16 --contexts 300,1500
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from dynrag.lm import load_lm
from dynrag.lm.kv_reuse import prefix_copy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="bundled")
    ap.add_argument("--context", type=int, default=900, help="cached prompt tokens before the pass")
    ap.add_argument("--widths", default="1,2,3,4,5,6,8")
    ap.add_argument("--repeats", type=int, default=25)
    ap.add_argument("--batches", default="", help="e.g. 1,2,4,8,16: time batched decode steps instead")
    ap.add_argument("--contexts", default="300,1500", help="cached tokens per row, with --batches")
    args = ap.parse_args()
    lm = load_lm(args.model, progress=False)
    if args.batches:
        batched_steps(lm, [int(b) for b in args.batches.split(",")], [int(c) for c in args.contexts.split(",")],
                      args.repeats)
        return
    model = lm.model
    widths = [int(w) for w in args.widths.split(",")]
    vocab = model.config.vocab_size
    ids = [(17 * i + 101) % vocab for i in range(args.context)]
    times: dict[int, list[float]] = {w: [] for w in widths}
    with torch.inference_mode():
        cache = lm._kv.new_cache()
        model(input_ids=torch.tensor([ids]), cache=cache, use_cache=True, logits_to_keep=1)
        for _ in range(args.repeats):
            for w in widths:  # interleaved, so that a change of load falls on every width alike
                working = prefix_copy(cache, args.context)
                fed = torch.tensor([[(31 * k + 7) % vocab for k in range(w)]])
                start = time.perf_counter()
                model(input_ids=fed, cache=working, use_cache=True, logits_to_keep=w)
                times[w].append(time.perf_counter() - start)
    one = statistics.median(times[widths[0]])
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"model {lm.name}, {args.context} cached tokens, torch threads {torch.get_num_threads()}, "
          f"median of {args.repeats}, load average {load}")
    print("| new tokens | ms per pass | × one token | ms per token |")
    print("| ---: | ---: | ---: | ---: |")
    for w in widths:
        ms = statistics.median(times[w]) * 1000
        print(f"| {w} | {ms:.1f} | {ms / (one * 1000):.2f} | {ms / w:.1f} |")


def batched_steps(lm, batches: list[int], contexts: list[int], repeats: int) -> None:
    """Median time of one decode step at each batch size and cache length, interleaved."""
    from transformers import DynamicCache

    model, vocab = lm.model, lm.model.config.vocab_size
    times: dict[tuple[int, int], list[float]] = {(b, c): [] for c in contexts for b in batches}
    with torch.inference_mode():
        caches = {}
        for c in contexts:
            ids = [(17 * i + 101) % vocab for i in range(c)]
            one = DynamicCache(config=model.config)
            model(input_ids=torch.tensor([ids]), cache=one, use_cache=True, logits_to_keep=1)
            for b in batches:
                batch = DynamicCache(config=model.config)
                for i, layer in enumerate(one.layers):
                    batch.update(layer.keys.expand(b, -1, -1, -1).contiguous(),
                                 layer.values.expand(b, -1, -1, -1).contiguous(), i)
                caches[(b, c)] = batch
        for _ in range(repeats):
            for key in times:
                b, c = key
                working = prefix_copy(caches[key], c)
                fed = torch.tensor([[(31 * k + 7) % vocab] for k in range(b)])
                mask = torch.ones((b, c + 1), dtype=torch.long)
                positions = torch.full((b, 1), c, dtype=torch.long)
                start = time.perf_counter()
                model(input_ids=fed, attention_mask=mask, position_ids=positions, cache=working, use_cache=True,
                      logits_to_keep=1)
                times[key].append(time.perf_counter() - start)
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"model {lm.name}, torch threads {torch.get_num_threads()}, median of {repeats}, load average {load}")
    print("| cached tokens per row | rows | ms per step | tokens/s | × tokens/s of 1 row |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for c in contexts:
        base = 1 / statistics.median(times[(batches[0], c)])
        for b in batches:
            rate = b / statistics.median(times[(b, c)])
            print(f"| {c} | {b} | {statistics.median(times[(b, c)]) * 1000:.1f} | {rate:.1f} | {rate / base:.2f} |")


if __name__ == "__main__":
    main()
