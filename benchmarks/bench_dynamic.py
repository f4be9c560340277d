"""Every method side by side on the same questions, in one process, decoding as it is now
("with": key/value caches reused across calls, prompt-lookup drafts, DRAGIN's settled stop) and as
before it ("without"): accuracy, retrievals, tokens decoded vs kept (waste), prefill tokens per
question and seconds per question, each method's speed-up, and latency relative to `single`.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_dynamic.py --data HOTPOT_DEV.json --limit 50 \\
        [--methods single,dragin] [--option dragin:theta=0.1] [--log runs/bench-dynamic.jsonl] [--results FILE]

The methods are the method registry's (so a method added to it joins the table), one after
another. For each question a method answers twice, "with" (`kv_reuse=recent`, `lookup=5`) and
"without" (`kv_reuse=prefix`: only the cached instruction-and-exemplars prefix; `lookup=0`: one
token per forward pass; `dragin` with `settled_stop=false`: the decoding before these three speed-ups), in
alternating order, so that the load of a shared machine falls on both alike. Seconds are wall
clock and CPU time (user + system of this process; with OMP_NUM_THREADS=1 torch uses one core, so
CPU time is what a quiet machine's wall clock would be). Greedy decoding makes both answers the
same; the table counts the questions where they differ (float rounding at a near tie).

Each answer is appended to the --log JSONL as it finishes; running the same command again skips
what is logged, so a killed run resumes. The report is computed from the log.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

from dynrag.datasets.loaders import load_examples
from dynrag.datasets.metrics import score_answer
from dynrag.eval.pool import pool_contexts
from dynrag.io.jsonl import JsonlAppender, read_jsonl
from dynrag.lm import load_lm
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.registry import METHODS, build_method, method_traits
from dynrag.registry import parse_pairs
from dynrag.retrieval.bm25 import BM25Index

MODES = {"with": "recent", "without": "prefix"}  # kv_reuse of each mode
DRAFTS = {"with": 5, "without": 0}  # lookup (prompt-lookup draft tokens) of each mode
# Method options that restore the decoding before the speed-ups in the "without" mode, unless --option sets them.
BEFORE_OPTIONS = {"without": {"dragin": {"settled_stop": "false"}}}
REFERENCE = "single"
STATIC = {"direct", "single"}  # every other method decides while it writes: the "dynamic" ones
GOAL_SPEEDUP, GOAL_DRAGIN_VS_SINGLE = 1.3, 1.1


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def answer_record(method, lm, example, method_name: str, mode: str) -> dict:
    lm.kv_reuse = MODES[mode]
    lm.draft_tokens = DRAFTS[mode]
    before = lm.prefill_counts
    started, cpu = time.perf_counter(), cpu_seconds()
    answer = method.answer(example.question)
    seconds, cpu = time.perf_counter() - started, cpu_seconds() - cpu
    counts = lm.prefill_counts.minus(before)
    score = score_answer(answer.final_answer, answer.text, example.answers)
    return {
        "method": method_name, "id": example.id, "mode": mode, "seconds": round(seconds, 4),
        "cpu_seconds": round(cpu, 4), "em": score.em, "f1": score.f1, "answer": answer.text,
        "retrievals": len(answer.trace.retrievals), "decoded": answer.trace.generated_tokens,
        "kept": answer.trace.kept_tokens, "calls": counts.calls, "prompt_tokens": counts.prompt_tokens,
        "prefilled_tokens": counts.prefilled_tokens, "reused_tokens": counts.reused_tokens,
        "reuse_hits": counts.hits, "draft_proposed": counts.draft_proposed,
        "draft_accepted": counts.draft_accepted,
    }


def run(args, examples, methods: list[str], options: dict[str, dict[str, str]]) -> None:
    done = {(r["method"], r["id"], r["mode"]) for r in read_jsonl(args.log, repair=True)}
    # --interleave answers each question with every method before the next question, so that a
    # shared machine's load falls on the methods alike and their ratio to `single` is fair.
    pairs = ([(m, ex) for ex in examples for m in methods] if args.interleave
             else [(m, ex) for m in methods for ex in examples])
    position = {ex.id: k for k, ex in enumerate(examples)}  # which mode goes first alternates by question
    todo = [(m, ex) for m, ex in pairs if any((m, ex.id, mode) not in done for mode in MODES)]
    if not todo:
        return
    with tempfile.TemporaryDirectory() as tmp:
        BM25Index.build(pool_contexts(examples), Path(tmp) / "idx", progress=False)
        index = BM25Index.load(Path(tmp) / "idx", backend="numpy")
        lm = load_lm(args.model, progress=False)
        builder = PromptBuilder.for_dataset(args.dataset)
        lm.generate(builder.build("warm-up"), 1)  # computes the pinned exemplar prefix before timing starts
        print(f"{len(examples)} {args.dataset} questions, model {lm.name}, {len(index)} pooled context passages; "
              f"{len(todo)} (method, question) pairs to answer", file=sys.stderr, flush=True)
        with JsonlAppender(args.log) as log:
            built: dict[tuple[str, str], object] = {}
            for i, (name, ex) in enumerate(todo):
                order = list(MODES) if position[ex.id] % 2 == 0 else list(reversed(MODES))
                for mode in order:
                    if (name, ex.id, mode) in done:
                        continue
                    if (name, mode) not in built:
                        chosen = {**BEFORE_OPTIONS.get(mode, {}).get(name, {}), **options.get(name, {})}
                        built[(name, mode)] = build_method(name, lm, index if method_traits(name).needs_retrieval else None,
                                                           chosen, builder)
                    record = answer_record(built[(name, mode)], lm, ex, name, mode)
                    log.append(record)
                    print(f"[{i + 1}/{len(todo)}] {name} {ex.id} {mode}: {record['seconds']:.1f} s, "
                          f"{record['prefilled_tokens']} prefilled / {record['prompt_tokens']} prompt tokens",
                          file=sys.stderr, flush=True)


def report(args, methods: list[str], ids: list[str]) -> str:
    records = read_jsonl(args.log)
    by: dict[tuple[str, str], dict[str, dict]] = defaultdict(dict)
    for r in records:
        by[(r["method"], r["mode"])][r["id"]] = r
    rows = {}
    for name in methods:
        complete = [i for i in ids if all(i in by[(name, mode)] for mode in MODES)]
        if not complete:
            continue
        n = len(complete)

        def mean(mode: str, key: str) -> float:
            return sum(float(by[(name, mode)][i][key]) for i in complete) / n

        same = sum(by[(name, "with")][i]["answer"] == by[(name, "without")][i]["answer"] for i in complete)
        rows[name] = {
            "n": n, "em": mean("with", "em"), "f1": mean("with", "f1"), "ret": mean("with", "retrievals"),
            "decoded": mean("with", "decoded"), "kept": mean("with", "kept"), "calls": mean("with", "calls"),
            "prompt": mean("with", "prompt_tokens"),
            "prefill_without": mean("without", "prefilled_tokens"), "prefill_with": mean("with", "prefilled_tokens"),
            "s_without": mean("without", "seconds"), "s_with": mean("with", "seconds"),
            "cpu_without": mean("without", "cpu_seconds"), "cpu_with": mean("with", "cpu_seconds"),
            "same": same, "ids": complete,
            "accepted": sum(float(by[(name, "with")][i].get("draft_accepted", 0)) for i in complete) / n,
        }
    ref = rows.get(REFERENCE)

    def versus(name: str, mode: str, key: str) -> float:
        # × single on the questions both have answered, so that a run stopped part-way (methods
        # with different numbers of questions done) still compares like with like.
        common = set(rows[name]["ids"]) & set(ref["ids"])
        return (sum(float(by[(name, mode)][i][key]) for i in common)
                / sum(float(by[(REFERENCE, mode)][i][key]) for i in common))
    lines = [
        "| method | n | EM | F1 | ret/q | decoded/q | waste | calls/q | prompt tok/q | prefilled/q without | "
        "prefilled/q with | s/q without | s/q with | speed-up (wall) | CPU s/q without | CPU s/q with | "
        "speed-up (CPU) | × single without (CPU) | × single with (CPU) | drafts kept/q | same answers |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in rows.items():
        waste = r["decoded"] / r["kept"] if r["kept"] else float("nan")
        vs = ((f"{versus(name, 'without', 'cpu_seconds'):.2f}", f"{versus(name, 'with', 'cpu_seconds'):.2f}")
              if ref else ("–", "–"))
        lines.append(
            f"| {name} | {r['n']} | {r['em']:.3f} | {r['f1']:.3f} | {r['ret']:.2f} | {r['decoded']:.1f} | {waste:.3f} | "
            f"{r['calls']:.2f} | {r['prompt']:.0f} | {r['prefill_without']:.0f} | {r['prefill_with']:.0f} | "
            f"{r['s_without']:.2f} | {r['s_with']:.2f} | **{r['s_without'] / r['s_with']:.2f}×** | "
            f"{r['cpu_without']:.2f} | {r['cpu_with']:.2f} | **{r['cpu_without'] / r['cpu_with']:.2f}×** | "
            f"{vs[0]} | {vs[1]} | {r['accepted']:.1f} | {r['same']}/{r['n']} |"
        )
    lines.append("")
    dynamic = [name for name in rows if name not in STATIC]
    if dynamic:
        speedups = {name: rows[name]["cpu_without"] / rows[name]["cpu_with"] for name in dynamic}
        met = all(s >= GOAL_SPEEDUP for s in speedups.values())
        lines.append(f"- Goal: the dynamic methods ≥ {GOAL_SPEEDUP}× faster than without the speed-ups (CPU time): "
                     + ", ".join(f"{k} {v:.2f}×" for k, v in speedups.items()) + f": **{'met' if met else 'NOT met'}**.")
    if ref and "dragin" in rows:
        wall, cpu = versus("dragin", "with", "seconds"), versus("dragin", "with", "cpu_seconds")
        before = versus("dragin", "without", "cpu_seconds")
        n_common = len(set(rows["dragin"]["ids"]) & set(ref["ids"]))
        met = cpu <= GOAL_DRAGIN_VS_SINGLE
        lines.append(f"- Goal: `dragin` ≤ {GOAL_DRAGIN_VS_SINGLE}× `single`'s seconds per question (with): "
                     f"{cpu:.2f}× by CPU time ({wall:.2f}× wall; without {before:.2f}×; on the {n_common} questions "
                     f"both answered): "
                     f"**{'met' if met else 'NOT met'}**.")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="benchmark file of --dataset's format (default HotpotQA JSON)")
    ap.add_argument("--dataset", default="hotpotqa")
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--model", default="bundled")
    ap.add_argument("--methods", default=",".join(METHODS.names()), help="comma-separated, registry order by default")
    ap.add_argument("--option", action="append", default=[], help="METHOD:KEY=VALUE, e.g. dragin:theta=0.1")
    ap.add_argument("--log", default="runs/bench-dynamic.jsonl", help="per-answer JSONL (resumes from it)")
    ap.add_argument("--results", help="append the markdown section to this file")
    ap.add_argument("--interleave", action="store_true",
                    help="question by question, every method in turn (fair ratios between methods)")
    args = ap.parse_args()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in methods:
        METHODS.get(m)  # an unknown name fails here, listing the valid ones
    options: dict[str, dict[str, str]] = defaultdict(dict)
    for item in args.option:
        name, _, pair = item.partition(":")
        options[name].update(parse_pairs([pair]))
    for name, values in options.items():
        METHODS.parse_options(name, values)
    load_start = os.getloadavg()
    examples = list(load_examples(args.dataset, args.data, limit=args.limit))
    run(args, examples, methods, options)
    text = report(args, methods, [ex.id for ex in examples])
    command = shlex.join(["OMP_NUM_THREADS=" + os.environ.get("OMP_NUM_THREADS", ""), ".venv/bin/python", *sys.argv])
    head = (f"{len(examples)} {args.dataset} questions, model `{args.model}`, pooled-contexts BM25 index; "
            f"command `{command}`; finished {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; load average at "
            f"start {load_start[0]:.2f} / {load_start[1]:.2f} / {load_start[2]:.2f}, at end "
            + " / ".join(f"{x:.2f}" for x in os.getloadavg()) + "\n\n")
    print(head + text)
    if args.results:
        with open(args.results, "a", encoding="utf-8") as f:
            f.write(head + text)


if __name__ == "__main__":
    main()
