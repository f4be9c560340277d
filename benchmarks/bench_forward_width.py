"""What one forward pass costs when it feeds 1, 2, ... new tokens after a long cached prompt: the
figure behind prompt-lookup decoding's rule of never checking a draft of under 3 tokens
(lm/lookup.py). Prints the median milliseconds of each width and its ratio to one token.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_forward_width.py [--model bundled] [--context 900]
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
    args = ap.parse_args()
    lm = load_lm(args.model, progress=False)
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


if __name__ == "__main__":
    main()
