"""SeaKR on transformers and on llama.cpp in one process, on the same questions: seconds a question,
seconds a sampling call (the k continuations and their hidden states), retrievals a question, and
how often the two backends reach the same retrieval decisions and final answer. The backends'
samples differ (the quantised weights give other logits, so other draws), so agreement is a
measure of how much SeaKR's decisions rest on the draws, not a check of the port; the port is
checked by tests/lm/test_llama_hidden.py (each row's state is the one a single pass reads).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_seakr_backends.py --data HOTPOT_DEV.json \
        --limit 3 --model bundled:qwen2.5-0.5b [--out rows.jsonl] [--record DIR]

Questions are HotpotQA's, retrieving with BM25 from the pooled context paragraphs of the loaded
questions (as `eval --corpus contexts`), top 3, SeaKR at its defaults (20 samples). The backends
take turns answering first. With --out, each question's rows are appended as JSON lines and a rerun
skips what is there. With --record DIR the figures are also written as a systems result record.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from dynrag.datasets.loaders import load_examples
from dynrag.eval.pool import pool_contexts
from dynrag.lm import load_lm
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.registry import build_method
from dynrag.retrieval.bm25 import BM25Index

BACKENDS = ("transformers", "llama.cpp")


class TimedSampling:
    """A model whose sample_hidden_states calls are counted and timed."""

    def __init__(self, inner):
        self.inner, self.calls, self.seconds = inner, 0, 0.0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def sample_hidden_states(self, *args, **kwargs):
        started = time.perf_counter()
        try:
            return self.inner.sample_hidden_states(*args, **kwargs)
        finally:
            self.calls += 1
            self.seconds += time.perf_counter() - started


def spec_on(model: str, backend: str) -> str:
    return f"{model}{'&' if '?' in model else '?'}backend={backend}"


def run(args) -> list[tuple]:
    examples = list(load_examples("hotpotqa", args.data, limit=args.limit))
    folder = Path(tempfile.mkdtemp(prefix="bench-seakr-"))
    BM25Index.build(pool_contexts(examples), folder / "index", progress=False)
    index = BM25Index.load(folder / "index", backend="numpy")
    builder = PromptBuilder.for_dataset("hotpotqa")
    lms = {b: TimedSampling(load_lm(spec_on(args.model, b), progress=False)) for b in BACKENDS}
    methods = {b: build_method("seakr", lm, index, {"k": 3}, builder) for b, lm in lms.items()}
    out = Path(args.out) if args.out else None
    rows = [json.loads(line) for line in out.read_text().splitlines()] if out and out.exists() else []
    done = {r["id"] for r in rows}
    for i, ex in enumerate(examples):
        if ex.id in done:
            continue
        row = {"id": ex.id}
        for backend in BACKENDS[i % 2:] + BACKENDS[: i % 2]:
            lm = lms[backend]
            calls, sampling = lm.calls, lm.seconds
            started = time.perf_counter()
            answer = methods[backend].answer(ex.question)
            row[backend] = {"seconds": time.perf_counter() - started, "sampling_calls": lm.calls - calls,
                            "sampling_seconds": lm.seconds - sampling, "final": answer.final_answer.strip(),
                            "retrievals": len(answer.trace.retrievals),
                            "queries": [r.query for r in answer.trace.retrievals]}
        rows.append(row)
        if out:
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
        print(f"{len(rows)}/{len(examples)} " + " ".join(f"{b}={row[b]['seconds']:.0f}s" for b in BACKENDS),
              file=sys.stderr, flush=True)
    return report(args.model, rows)


def report(model: str, rows: list[dict]) -> list[tuple]:
    n = len(rows)
    on = f"{n} HotpotQA questions, pooled contexts, 20 samples"
    total = {b: sum(r[b]["seconds"] for r in rows) for b in BACKENDS}
    calls = {b: sum(r[b]["sampling_calls"] for r in rows) for b in BACKENDS}
    sampling = {b: sum(r[b]["sampling_seconds"] for r in rows) for b in BACKENDS}
    print(f"seakr (paper variant, defaults), {model}, {on}")
    figures = []
    for b in BACKENDS:
        per_call = sampling[b] / max(calls[b], 1)
        print(f"  {b:<13} {total[b] / n:7.1f} s/question  {per_call:6.2f} s a sampling call ({calls[b]} calls)  "
              f"{sum(r[b]['retrievals'] for r in rows) / n:4.2f} retrievals/question")
        figures += [(f"seakr s/question, {b}", total[b] / n, "s", on),
                    (f"seakr s a sampling call, {b}", per_call, "s", f"{calls[b]} calls; {on}")]
    speed = total["transformers"] / total["llama.cpp"]
    call_speed = (sampling["transformers"] / max(calls["transformers"], 1)) / (
        sampling["llama.cpp"] / max(calls["llama.cpp"], 1))
    print(f"  llama.cpp against transformers: {speed:.2f}x faster a question, {call_speed:.2f}x a sampling call")
    same = sum(r["llama.cpp"]["final"] == r["transformers"]["final"] for r in rows)
    fired = sum(r["llama.cpp"]["retrievals"] == r["transformers"]["retrievals"] for r in rows)
    print(f"  same final answer {same}/{n}, same number of retrievals {fired}/{n}")
    return figures + [
        ("seakr s/question, transformers ÷ llama.cpp", speed, "x", on),
        ("seakr s a sampling call, transformers ÷ llama.cpp", call_speed, "x", on),
        ("seakr llama.cpp vs transformers: same final answer", same / n, "share", f"{same} of {n}"),
        ("seakr llama.cpp vs transformers: same number of retrievals", fired / n, "share", f"{fired} of {n}"),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="HotpotQA JSON file")
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--model", default="bundled:qwen2.5-0.5b")
    ap.add_argument("--out", help="JSONL of each question's rows; a rerun resumes it")
    ap.add_argument("--record", metavar="DIR", help="also write the figures as a systems result record in DIR")
    args = ap.parse_args()
    from dynrag.reproduce.systems_record import Started, systems_id, write_systems_record

    started = Started.now()
    figures = run(args)
    if args.record:
        write_systems_record(args.record, systems_id("bench-seakr-backends", args.model, f"n{args.limit}"),
                             f"SeaKR on llama.cpp against transformers, {args.limit} HotpotQA questions ({args.model})",
                             figures, started=started, models=[args.model], data=[args.data], corpus="contexts",
                             datasets=["hotpotqa"])


if __name__ == "__main__":
    main()
