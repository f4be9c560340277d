"""Seconds per optimizer step of `world teach`'s candidate recipes on one world and model.

    python benchmarks/bench_teach.py --world /tmp/teach-w1 --steps 3 --threads 2

Loads the model once per recipe, builds the packed rows `world teach` would train on, and times
`--steps` steps (the first one is reported apart: warm-up). Prints one JSON line per recipe.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from dynrag.training.models import load_trainable
from dynrag.world.teach import DEFAULT_LR, TeachOptions, build_rows, load_world, row_loss, trainable
from dynrag.world.teach_text import choose

RECIPES = (("full", "all"), ("full", "no_embeddings"), ("full", "mlp"), ("lora", "all"), ("lora", "mlp"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", required=True)
    ap.add_argument("--model", default="bundled")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pack-tokens", type=int, default=256)
    ap.add_argument("--recipe", action="append", help="METHOD/PARAMS (default: all five)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    world, _, train = load_world(args.world)
    recipes = [tuple(r.split("/")) for r in args.recipe] if args.recipe else RECIPES
    for method, params in recipes:
        options = TeachOptions(method=method, params=params, pack_tokens=args.pack_tokens, epochs=1)
        model, tokenizer, _ = load_trainable(args.model, progress=False)
        rows, batches = build_rows(tokenizer, world, choose(world, 0, entities=1), train, options)
        trained = trainable(model, options)
        optimizer = torch.optim.AdamW([p for p in trained.values()], lr=DEFAULT_LR[method])
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        times, tokens = [], []
        for batch in (batches * args.steps)[: args.steps]:
            started = time.perf_counter()
            loss, stats = row_loss(model, [rows[i] for i in batch], pad)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            times.append(time.perf_counter() - started)
            tokens.append(stats["tokens"])
        rest = times[1:] or times
        print(json.dumps({"method": method, "params": params, "threads": args.threads,
                          "trainable": sum(p.numel() for p in trained.values()), "tokens_per_step": tokens,
                          "first_step_s": round(times[0], 2), "mean_later_step_s": round(sum(rest) / len(rest), 2)}),
              flush=True)
        del model, optimizer, trained


if __name__ == "__main__":
    main()
