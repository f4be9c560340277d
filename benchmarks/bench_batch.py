"""Questions a minute with the batching engine (`eval --batch 8`) against one question at a time
(`--batch 1`) and against worker processes (`--workers auto`), per method, on HotpotQA dev.

    .venv/bin/python benchmarks/bench_batch.py --data HOTPOT_DEV.json [--limit 24] [--batch 8]
        [--methods direct,single,flare,dragin,deeprag] [--no-workers]

One process holds the bundled model; for each method it answers the same questions one at a time,
then with ``--batch`` in flight over a batching engine (the same model object, its cache of recent
calls emptied before each), then on one single-threaded worker process per core (the eval's
``--workers auto``; with ``--workers-batch B`` also with B questions in flight in each; their start and model load are left out of the figure: the time from the
start to the first answer, less that answer's own seconds). Retrieval is BM25 over the pooled
context paragraphs of the questions (`--corpus contexts`), k = 3, greedy decoding.

Answers are compared between one at a time and batched. Where they differ, the first generation
call whose tokens differ is found and the gap between the two competing tokens' logits at the
first differing position is printed (from a fresh one-row pass): a gap under 1e-4 is a near-tie
that float reassociation in a wider matrix product can flip, not a bug.
"""

from __future__ import annotations

import argparse
import os
import resource
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import tempfile

import torch

from dynrag.datasets.loaders import load_examples
from dynrag.eval.pool import contexts_index, pool_contexts
from dynrag.lm import load_lm
from dynrag.lm.batching import BatchingLM
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.registry import build_method, method_traits, parse_options


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


class Recording:
    """Passes calls through to ``lm``; keeps each question's generate calls in order (by thread)."""

    def __init__(self, lm):
        self.lm, self.calls, self.local = lm, {}, threading.local()

    def generate(self, prompt, max_new_tokens, *args, **kwargs):
        out = self.lm.generate(prompt, max_new_tokens, *args, **kwargs)
        self.calls.setdefault(self.local.question, []).append(out)
        return out

    def __getattr__(self, name):
        return getattr(self.lm, name)


def answer_with(method, recording, question):
    recording.local.question = question
    return method.answer(question).to_dict()


def near_tie_gap(lm, a, b) -> str:
    """Logit gap at the first token where generations ``a`` (one at a time) and ``b`` differ."""
    t = next((i for i, (x, y) in enumerate(zip(a.token_ids, b.token_ids)) if x != y), None)
    if t is None:
        return "same tokens, different stop"
    ids = list(a.prompt_token_ids) + list(a.token_ids[:t])
    with torch.inference_mode():
        logits = lm.model(input_ids=torch.tensor([ids], device=lm.model.device)).logits[0, -1].float()
    gap = float(logits[a.token_ids[t]] - logits[b.token_ids[t]])
    return f"token {t}: logit gap {gap:.2e}"


def run_workers(method: str, options: dict, data: str, limit: int, index_dir: Path, work: Path, cores: int,
                batch: int = 1):
    from dynrag.config import load_run_config
    from dynrag.eval.processes import Processes
    from dynrag.eval.runner import default_method_factory, eval_config
    from dynrag.eval.worker import WorkerJob
    from dynrag.run.plan import make_plan

    plan = make_plan(load_run_config(None, dict(dataset="hotpotqa", data=data, method=method, options=options,
                                                 limit=limit, out=work / f"w-{method}", corpus="contexts")),
                     command="eval")
    job = WorkerJob(eval_config(plan), str(index_dir), str(work), default_method_factory, torch_threads=1, batch=batch)
    examples = list(load_examples("hotpotqa", Path(data)))[:limit]
    started = time.perf_counter()
    first = None
    answers = {}
    for outcome in Processes(job, cores).answers([(ex.id, ex.question) for ex in examples]):
        if first is None:
            first = time.perf_counter() - started - outcome.seconds  # start-up and model load
        answers[outcome.id] = outcome.answer["final_answer"]
    return time.perf_counter() - started - (first or 0.0), answers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="HotpotQA dev JSON")
    ap.add_argument("--limit", type=int, default=24)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--methods", default="direct,single,flare,dragin,deeprag")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--no-workers", action="store_true", help="leave out the worker-process comparison")
    ap.add_argument("--workers-batch", type=int, default=0,
                    help="also time the worker processes with this many questions in flight in each (--workers N --batch B)")
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    examples = list(load_examples("hotpotqa", Path(args.data)))[: args.limit]
    questions = [ex.question for ex in examples]
    work = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    index, _ = contexts_index(work, pool_contexts(examples), progress=False)
    lm = load_lm("bundled", progress=False)
    builder = PromptBuilder.for_dataset("hotpotqa")
    print(f"# {len(questions)} HotpotQA questions, bundled model, torch threads {torch.get_num_threads()}, "
          f"{cores} cores, --batch {args.batch}, max_new_tokens {args.max_new_tokens}, load at start {load()}", flush=True)
    rows, differences = [], []
    for name in args.methods.split(","):
        options = {"max_new_tokens": args.max_new_tokens}
        retriever = index if method_traits(name).needs_retrieval else None
        alone_lm, batching = Recording(lm), BatchingLM(lm, max_rows=args.batch)
        batched_lm = Recording(batching)
        alone = build_method(name, alone_lm, retriever, parse_options(name, options), builder)
        batched = build_method(name, batched_lm, retriever, parse_options(name, options), builder)
        lm.kv_reuse = lm.kv_reuse  # empties the recent caches: neither run inherits the other's
        before = load()
        t0 = time.perf_counter()
        one = [answer_with(alone, alone_lm, q) for q in questions]
        t_one = time.perf_counter() - t0
        lm.kv_reuse = lm.kv_reuse
        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.batch) as pool:
            many = list(pool.map(lambda q: answer_with(batched, batched_lm, q), questions))
        t_many = time.perf_counter() - t0
        stats = batching.stats
        batching.close()
        t_workers, by_workers = (None, None)
        if not args.no_workers:
            t_workers, by_workers = run_workers(name, options, args.data, args.limit, index.path, work, cores)
        t_wb = None
        if args.workers_batch > 1:
            t_wb, _ = run_workers(name, options, args.data, args.limit, index.path, work, cores, args.workers_batch)
        same = sum(a["answer"] == b["answer"] for a, b in zip(one, many))
        for q, a, b in zip(questions, one, many):
            if a["answer"] != b["answer"]:
                pair = next(((x, y) for x, y in zip(alone_lm.calls[q], batched_lm.calls[q]) if x.token_ids != y.token_ids),
                            None)
                differences.append(f"{name}: {q!r}: " + (near_tie_gap(lm, *pair) if pair else "calls differ in number"))
        rows.append((name, t_one, t_many, t_workers, t_wb, same, stats, before, load()))
        w = f"{60 * len(questions) / t_workers:.1f}" if t_workers else "–"
        print(f"{name}: one at a time {t_one:.0f} s, batched {t_many:.0f} s, workers {t_workers or 0:.0f} s "
              f"(q/min {60 * len(questions) / t_one:.1f} / {60 * len(questions) / t_many:.1f} / {w}); "
              + (f", workers x batch {args.workers_batch} {t_wb:.0f} s" if t_wb else "") +
              f"; same answers {same}/{len(questions)}; mean rows a step {stats.row_steps / max(stats.steps, 1):.1f}; "
              f"load {before} -> {load()}", flush=True)
    print()
    wb = f"--workers {cores} --batch {args.workers_batch}"
    print(f"| method | q/min one at a time | q/min --batch {args.batch} | × one at a time | q/min --workers {cores} "
          f"| batch × workers | q/min {wb} | {wb} × workers | same answers | rows a step | load |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    n = len(questions)
    for name, t_one, t_many, t_workers, t_wb, same, stats, before, after in rows:
        workers = f"{60 * n / t_workers:.1f} | {t_workers / t_many:.2f}" if t_workers else "– | –"
        both = f"{60 * n / t_wb:.1f} | {t_workers / t_wb:.2f}" if t_wb and t_workers else "– | –"
        print(f"| {name} | {60 * n / t_one:.1f} | {60 * n / t_many:.1f} | {t_one / t_many:.2f} | {workers} | {both} | "
              f"{same}/{n} | {stats.row_steps / max(stats.steps, 1):.1f} | {before} → {after} |")
    print()
    print("answers that differ between one at a time and batched:" if differences else "no answer differs")
    for line in differences:
        print(f"- {line}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak resident memory of this process (one model, both ways): {peak:.0f} MB; load at end {load()}")


if __name__ == "__main__":
    main()
