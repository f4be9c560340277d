"""Decoding with last-layer attention capture vs plain decoding with the fast (sdpa) kernel.

Goal: <= 1.15x the time and <= 1.10x the peak memory of plain decoding, for 128 greedy
tokens after a >= 1,500-token prompt on the bundled model. Each variant runs in its own process so
peak RSS is its own; times are the best of --repeats runs after a warm-up.

    .venv/bin/python benchmarks/bench_capture.py [--model bundled] [--prompt-tokens 1600]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def build_prompt(lm, target_tokens: int) -> str:
    from dynrag.corpus import read_passages
    from dynrag.data import demo_passages_path

    parts = []
    for p in read_passages(demo_passages_path()):
        parts.append(f"{p.title}: {p.text}")
        text = "\n".join(parts)
        if lm.count_tokens(text) >= target_tokens:
            break
    return text + "\nQuestion: Summarise the history of the region in detail.\nAnswer:"


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(variant: str, model: str, prompt_tokens: int, new_tokens: int, repeats: int) -> dict:
    import torch

    from dynrag.lm import load_lm

    torch.set_num_threads(2)
    lm = load_lm(model, progress=False)
    lm.eos_token_ids = set()  # decode exactly new_tokens in every variant
    prompt = build_prompt(lm, prompt_tokens)
    ids = lm.tokenizer(prompt, return_tensors="pt")
    n_prompt = int(ids.input_ids.shape[1])
    if variant == "plain_hf_generate":
        lm.model.set_attn_implementation("sdpa")

        def run():
            with torch.inference_mode():
                out = lm.model.generate(**ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                        do_sample=False, eos_token_id=None, pad_token_id=0)
            return int(out.shape[1] - n_prompt)
    else:
        capture = variant == "dynrag_capture"

        def run():
            return len(lm.generate(prompt, new_tokens, capture_attention=capture))

    after_load = rss_mb()
    run_tokens = run()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        run_tokens = run()
        times.append(time.perf_counter() - t)
    return {"variant": variant, "seconds": min(times), "tokens": run_tokens, "prompt_tokens": n_prompt,
            "peak_rss_mb": rss_mb(), "rss_after_load_mb": after_load}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="bundled")
    ap.add_argument("--prompt-tokens", type=int, default=1600)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.model, args.prompt_tokens, args.new_tokens, args.repeats)))
        return
    results = {}
    for variant in ("plain_hf_generate", "dynrag_plain", "dynrag_capture"):
        out = subprocess.run(
            [sys.executable, __file__, "--worker", variant, "--model", args.model, "--prompt-tokens",
             str(args.prompt_tokens), "--new-tokens", str(args.new_tokens), "--repeats", str(args.repeats)],
            capture_output=True, text=True, check=True,
        )
        results[variant] = json.loads(out.stdout.strip().splitlines()[-1])
    ref = results["plain_hf_generate"]
    print(f"model {args.model}: {ref['prompt_tokens']} prompt tokens, {ref['tokens']} new tokens")
    print(f"{'variant':<20}{'seconds':>9}{'tok/s':>8}{'peak RSS MB':>13}{'time x':>8}{'memory x':>10}")
    for name, r in results.items():
        print(f"{name:<20}{r['seconds']:>9.2f}{r['tokens'] / r['seconds']:>8.1f}{r['peak_rss_mb']:>13.0f}"
              f"{r['seconds'] / ref['seconds']:>8.3f}{r['peak_rss_mb'] / ref['peak_rss_mb']:>10.3f}")
    cap = results["dynrag_capture"]
    print(f"capture vs plain sdpa generate: time {cap['seconds'] / ref['seconds']:.3f}x (goal <= 1.15), "
          f"peak memory {cap['peak_rss_mb'] / ref['peak_rss_mb']:.3f}x (goal <= 1.10)")
    print(f"capture vs dynrag without capture: time {cap['seconds'] / results['dynrag_plain']['seconds']:.3f}x")


if __name__ == "__main__":
    main()
