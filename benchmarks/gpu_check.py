"""Check a model on the device and in the precision asked: speed, memory, and captured attention.

    python benchmarks/gpu_check.py                                  # bundled; CUDA in bf16, else cpu bf16
    python benchmarks/gpu_check.py --model hf:meta-llama/Llama-2-13b-chat-hf --device cuda --dtype bfloat16
    python benchmarks/gpu_check.py --device cpu --dtype bfloat16 --float32-reference

Loads the model once, runs a short greedy generation with last-layer attention capture twice —
plain decoding (lookup=0) and with prompt-lookup drafts — and prints tokens/s for each, whether
the two produced the same tokens, the peak device memory, and the largest difference between the
captured attention rows and an eager-attention reference pass of the same model over the same
tokens (``output_attentions``, no capture kernel). Then ``--batch`` variants of the prompt decode
together through the batching engine (lm/batch_engine.py) on the same device and dtype: how many
give the tokens they give alone, the captured rows' largest difference, and tokens/s of the batch.
``--float32-reference`` also loads a float32
copy on the CPU and compares its greedy tokens and captured attention (small models only).
Without a GPU the default is ``device=cpu dtype=bfloat16``: the same code path, on the CPU.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

import numpy as np
import torch

from dynrag.lm.device import cuda_count
from dynrag.lm.loader import load_lm
from dynrag.lm.spec import ModelSpec

PROMPT = (
    "Question: Who built the old bridge over the river in the town, and in which year?\n"
    "The old bridge over the river in the town was built by the engineer Anna Berg in 1887. "
    "The bridge over the river in the town was built by"
)


def peak_memory_bytes(device: str) -> int:
    if device.startswith("cuda"):
        return int(torch.cuda.max_memory_allocated(torch.device(device)))
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KB


def timed_generation(lm, prompt: str, tokens: int, draft_tokens: int):
    lm.draft_tokens = draft_tokens
    lm.kv_reuse = "off"  # every run prefills cold: the runs are comparable
    if str(lm.model.device).startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = lm.generate(prompt, max_new_tokens=tokens, capture_attention=True)
    if str(lm.model.device).startswith("cuda"):
        torch.cuda.synchronize()
    return out, time.perf_counter() - start


@torch.inference_mode()
def eager_rows(lm, generation) -> list[np.ndarray]:
    """Last-layer attention (mean over heads) of each generated token from an eager pass."""
    from dynrag.lm.capture import CAPTURE_IMPLEMENTATION

    ids = list(generation.prompt_token_ids) + list(generation.token_ids)
    lm.model.set_attn_implementation("eager")
    try:
        out = lm.model(input_ids=torch.tensor([ids], device=lm.model.device), output_attentions=True, use_cache=False)
    finally:
        lm.model.set_attn_implementation(CAPTURE_IMPLEMENTATION)
    last = out.attentions[-1][0].float().mean(dim=0).cpu().numpy()  # (T, T)
    start = len(generation.prompt_token_ids)
    return [last[start + i, : start + i + 1] for i in range(len(generation.token_ids))]


def max_row_difference(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    diffs = [float(np.abs(x[: len(y)] - y[: len(x)]).max()) for x, y in zip(a, b) if len(x) and len(y)]
    return max(diffs) if diffs else float("nan")


def batched_check(lm, prompt: str, tokens: int, batch: int) -> dict:
    """``batch`` variants of ``prompt`` decoded alone, then together through the batching engine."""
    from concurrent.futures import ThreadPoolExecutor

    from dynrag.lm.batching import BatchingLM

    prompts = [" ".join([prompt.split(". ")[0] + "."] * (1 + i % 3)) + " " + prompt for i in range(batch)]
    lm.draft_tokens = 0
    alone = [timed_generation(lm, p, tokens, 0)[0] for p in prompts]
    batching = BatchingLM(lm, max_rows=batch)
    batching.engine.start_together(batch)  # rows overlap by construction, not by thread timing
    start = time.perf_counter()
    with ThreadPoolExecutor(batch) as pool:
        together = list(pool.map(lambda p: batching.generate(p, tokens, capture_attention=True), prompts))
    if str(lm.model.device).startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    batching.close()
    return {
        "batch_rows": batching.stats.peak_rows,
        "batch_same_tokens": sum(a.token_ids == b.token_ids for a, b in zip(alone, together)),
        "batch_attention_max_diff": max(max_row_difference(a.attention, b.attention)
                                        for a, b in zip(alone, together) if a.token_ids == b.token_ids),
        "batch_tokens_per_s": round(sum(len(b.token_ids) for b in together) / seconds, 2),
    }


def check(model: str, device: str, dtype: str, tokens: int, draft_tokens: int, float32_reference: bool,
          prompt: str = PROMPT, batch: int = 4) -> dict:
    spec = ModelSpec.parse(model).with_options(device=device, dtype=dtype)
    lm = load_lm(spec, progress=True)
    where = str(lm.model.device)
    if where.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(torch.device(where))
    timed_generation(lm, prompt, 2, 0)  # warm-up: kernels, allocator
    plain, plain_s = timed_generation(lm, prompt, tokens, 0)
    drafted, drafted_s = timed_generation(lm, prompt, tokens, draft_tokens)
    result = {
        "model": str(spec), "device": where, "dtype": str(lm.model.dtype).removeprefix("torch."),
        "tokens": len(plain.token_ids),
        "plain_tokens_per_s": round(len(plain.token_ids) / plain_s, 2),
        "lookup_tokens_per_s": round(len(drafted.token_ids) / drafted_s, 2),
        "lookup_same_tokens": plain.token_ids == drafted.token_ids,
        "lookup_attention_max_diff": max_row_difference(plain.attention, drafted.attention),
        "eager_attention_max_diff": max_row_difference(plain.attention, eager_rows(lm, plain)),
        "peak_memory_gb": round(peak_memory_bytes(where) / 1e9, 3),
        "text": lm.decode(plain.token_ids),
    }
    if batch > 1:
        result.update(batched_check(lm, prompt, tokens, batch))
    if float32_reference:
        reference = load_lm(ModelSpec.parse(model).with_options(device="cpu", dtype="float32"), progress=True)
        ref, _ = timed_generation(reference, prompt, tokens, 0)
        result["float32_same_tokens"] = ref.token_ids == plain.token_ids
        shared = 0
        while shared < min(len(ref.token_ids), len(plain.token_ids)) and ref.token_ids[shared] == plain.token_ids[shared]:
            shared += 1
        result["float32_shared_prefix_tokens"] = shared
        # Rows are compared where both runs saw the same tokens.
        result["float32_attention_max_diff"] = max_row_difference(plain.attention[:shared], ref.attention[:shared])
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bundled")
    parser.add_argument("--device", default="auto", help="auto (CUDA if present, else cpu), cpu, cuda, cuda:N, mps")
    parser.add_argument("--dtype", default="bfloat16", choices=["auto", "float32", "bfloat16", "float16"])
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--lookup", type=int, default=5, help="draft tokens of the prompt-lookup run")
    parser.add_argument("--batch", type=int, default=4, help="rows of the batched check (1: leave it out)")
    parser.add_argument("--float32-reference", action="store_true", help="compare with a float32 copy on the CPU")
    args = parser.parse_args(argv)
    device = args.device if args.device != "auto" or cuda_count() else "cpu"
    result = check(args.model, device, args.dtype, args.tokens, args.lookup, args.float32_reference, args.prompt,
                   args.batch)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
