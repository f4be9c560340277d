"""Training throughput of DeepRAG's two stages against a plain transformers training loop on the
same batches, steps interleaved in one process (so the machine's load hits both alike), and the
peak memory of each side in a fresh process.

- imitation: ours = `losses.imitation_loss` (LM head on labelled positions only) + backward +
  clip + AdamW + one JSONL log line; reference = `model(input_ids, attention_mask, labels).loss`
  + backward + clip + AdamW.
- calibration (DPO): ours = the stage-II step (each pair's history run once, both completions
  continued from its key/value cache); reference = chosen and rejected as two full sequences in
  one padded batch, `model(...).logits` gathered over the completion. Both use the same
  precomputed reference log-probabilities (computing them per step would only add to the
  reference's cost).

Both sides train one model with one optimizer, step by step in turn (what the weights are does
not change what a step costs; one copy keeps the memory of the run down). Batches come from
2WikiMultihopQA train records turned into narratives with their gold
decomposition (a benchmark input only: three context paragraphs on every second step).

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/bench_train.py --data TRAIN.jsonl --steps 8 --threads 2
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from dynrag.corpus.passage import Passage
from dynrag.deeprag.examples import imitation_example
from dynrag.training.losses import collate, completion_logprobs, dpo_loss, imitation_loss
from dynrag.training.models import load_trainable
from dynrag.deeprag.pairs import build_pairs, tokenize_pair
from dynrag.deeprag.teachers import phrase_subquery
from dynrag.deeprag.trajectory import Trajectory
from dynrag.datasets.loaders import load_examples
from dynrag.io.jsonl import JsonlAppender
from dynrag.methods.deeprag.narrative import NarrativeStep

def bench_trajectories(path: str, n: int) -> list[Trajectory]:
    out = []
    for ex in load_examples("2wikimultihopqa", path, limit=n):
        steps, answers = [], []
        for i, hop in enumerate(ex.decomposition[:4]):
            subquery = phrase_subquery(hop, answers)
            passages = tuple(Passage(p.id, p.title, p.text) for p in ex.contexts[i : i + 3]) if i % 2 else ()
            answers.append(ex.answers[0] if i == len(ex.decomposition) - 1 else f"answer {i}")
            steps.append(NarrativeStep(subquery, bool(passages), answers[-1], passages))
        out.append(Trajectory(ex.id, ex.question, tuple(steps), ex.answers[0]))
    return out


def fresh(spec: str):
    model, tokenizer, _ = load_trainable(spec, progress=False)
    return model, tokenizer, torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-6)


def step_done(model, optimizer):
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def imitation_steps(spec, trajectories, batch_size, steps, which, log_path):
    """Yields (side, tokens, seconds) per step; `which` is 'both' (interleaved), 'ours' or 'reference'."""
    sides = ["reference", "ours"] if which == "both" else [which]
    shared = fresh(spec)  # one model and optimizer for both sides: the weights' values do not change the cost
    models = {side: shared for side in sides}
    tokenizer = shared[1]
    examples = [imitation_example(tokenizer, t) for t in trajectories]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    batches = [examples[i : i + batch_size] for i in range(0, batch_size * steps, batch_size)]
    with JsonlAppender(log_path) as log:
        for n, batch in enumerate(batches):
            ids, mask, labels = collate(batch, pad)
            for side in sides:
                model, _, optimizer = models[side]
                started = time.perf_counter()
                if side == "ours":
                    loss, _ = imitation_loss(model, ids, mask, labels)
                else:
                    loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
                loss.backward()
                step_done(model, optimizer)
                if side == "ours":
                    log.append({"step": n + 1, "loss": float(loss.detach())})
                yield side, int(mask.sum()), time.perf_counter() - started


def calibration_steps(spec, trajectories, batch_size, steps, which, beta=0.4):
    sides = ["reference", "ours"] if which == "both" else [which]
    shared = fresh(spec)
    models = {side: shared for side in sides}
    tokenizer = shared[1]
    pairs = build_pairs(trajectories)
    tokenized = [tokenize_pair(tokenizer, p) for p in pairs]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    # frozen reference log-probabilities, as stage II computes them once
    ref_model = next(iter(models.values()))[0]
    with torch.no_grad():
        reference = [completion_logprobs(ref_model, p, [c, r]).tolist() for p, c, r in tokenized[: batch_size * steps]]
    for n in range(steps):
        idx = list(range(n * batch_size, (n + 1) * batch_size))
        tokens = sum(len(tokenized[i][0]) + len(tokenized[i][1]) + len(tokenized[i][2]) for i in idx)
        for side in sides:
            model, _, optimizer = models[side]
            started = time.perf_counter()
            if side == "ours":
                for i in idx:
                    prompt, chosen, rejected = tokenized[i]
                    lp = completion_logprobs(model, prompt, [chosen, rejected])
                    loss, _ = dpo_loss(lp[0], lp[1], torch.tensor(reference[i][0]), torch.tensor(reference[i][1]), beta)
                    (loss / len(idx)).backward()
            else:
                seqs = [(tokenized[i][0], c) for i in idx for c in tokenized[i][1:]]
                width = max(len(p) + len(c) for p, c in seqs)
                ids = torch.full((len(seqs), width), pad)
                mask = torch.zeros((len(seqs), width), dtype=torch.long)
                for row, (p, c) in enumerate(seqs):
                    ids[row, : len(p) + len(c)] = torch.tensor(p + c)
                    mask[row, : len(p) + len(c)] = 1
                logp = F.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(), dim=-1)
                sums = []
                for row, (p, c) in enumerate(seqs):
                    positions = torch.arange(len(p) - 1, len(p) + len(c) - 1)
                    sums.append(logp[row, positions, torch.tensor(c)].sum())
                sums = torch.stack(sums).view(len(idx), 2)
                ref = torch.tensor([reference[i] for i in idx])
                loss, _ = dpo_loss(sums[:, 0], sums[:, 1], ref[:, 0], ref[:, 1], beta)
                loss.mean().backward()
            step_done(model, optimizer)
            yield side, tokens, time.perf_counter() - started


def run(args, which):
    trajectories = bench_trajectories(args.data, args.batch_size * args.steps + 8)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for task in args.tasks.split(","):  # one task at a time: its models are freed before the next
            if task == "imitation":
                steps = imitation_steps(args.model, trajectories, args.batch_size, args.steps, which, Path(tmp) / "log.jsonl")
            else:
                steps = calibration_steps(args.model, trajectories, args.batch_size, args.steps, which)
            tally = {}
            for side, tokens, seconds in steps:
                t = tally.setdefault(side, [0, 0.0, 0])
                t[2] += 1
                if t[2] > 1:  # the first step of each side warms up allocators and kernels
                    t[0] += tokens
                    t[1] += seconds
            results[task] = {side: {"tokens_per_second": round(t[0] / t[1], 1), "steps": t[2]} for side, t in tally.items()}
    return results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="bundled")
    ap.add_argument("--data", required=True,
                    help="2WikiMultihopQA train records (JSONL, e.g. deeprag_wikihop_dpo_new_train1000.jsonl)")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tasks", default="imitation,calibration")
    ap.add_argument("--only", choices=["ours", "reference"], help="(internal) one side alone, to measure its peak memory")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.only:
        out = run(args, args.only)
        out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        print(json.dumps(out))
        return
    results = run(args, "both")
    print(f"{'task':<12}{'reference tok/s':>17}{'ours tok/s':>12}{'ratio':>8}")
    for task, r in results.items():
        ratio = r["ours"]["tokens_per_second"] / r["reference"]["tokens_per_second"]
        print(f"{task:<12}{r['reference']['tokens_per_second']:>17.1f}{r['ours']['tokens_per_second']:>12.1f}{ratio:>7.2f}x", flush=True)
    print("peak memory (fresh process per side and task, ru_maxrss):")
    for task in args.tasks.split(","):
        peaks = {}
        for side in ("reference", "ours"):
            cmd = [sys.executable, __file__, "--model", args.model, "--data", args.data, "--steps", str(min(args.steps, 3)),
                   "--batch-size", str(args.batch_size), "--threads", str(args.threads), "--tasks", task, "--only", side]
            peaks[side] = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()[-1])["peak_rss_mb"]
        print(f"  {task:<12} reference {peaks['reference']:.0f} MB, ours {peaks['ours']:.0f} MB ({peaks['ours'] / peaks['reference']:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
