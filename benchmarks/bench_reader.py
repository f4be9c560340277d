"""Which bundled model reads best, in which prompt style? Every model answers the same HotpotQA
questions with the gold (supporting) paragraphs in the prompt, and closed-book, through the
project's shared prompt builder and `answer_once` (the path of `single` and `direct`).

    .venv/bin/python benchmarks/bench_reader.py --data HOTPOT_DEV.json --limit 100 \
        --models 'bundled:smollm2?prompt=plain,bundled:qwen2.5-0.5b?prompt=chat&backend=llama.cpp'

Each model runs in a child process of its own, so the peak resident memory printed is that
model's (weights, caches and all). A row: spec, setting, EM, F1 (SQuAD-style on the extracted
answer), seconds per question, peak RSS. `--json FILE` also writes the rows as JSON lines, each
with its final answers in question order, so two backends' answers can be compared one by one.
`--record DIR` writes the rows' EM, F1, seconds a question and peak memory as a systems result
record in DIR (docs/results-records.md).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def run_one(spec: str, data: str, limit: int, settings: list[str], answer_style: str, exemplars: int,
            reasoning: str = "chain") -> list[dict]:
    from dynrag.datasets.loaders import load_examples
    from dynrag.datasets.metrics import score_answer
    from dynrag.lm import load_lm
    from dynrag.methods.answering import answer_once
    from dynrag.methods.base import Trace
    from dynrag.methods.prompting import PromptBuilder
    from dynrag.retrieval.base import Hit

    examples = list(load_examples("hotpotqa", data, limit=limit))
    builder = PromptBuilder.for_dataset("hotpotqa", n_exemplars=exemplars).with_reasoning(reasoning)
    if answer_style == "short":
        builder = builder.answering_short()
    started = time.perf_counter()
    lm = load_lm(spec, progress=False)
    load_s = time.perf_counter() - started
    rows = []
    for setting in settings:
        em = f1 = 0.0
        answers = []
        started = time.perf_counter()
        for ex in examples:
            by_id = {p.id: p for p in ex.contexts}
            hits = [Hit(p.id, p.title, p.text, 1.0) for p in (by_id[i] for i in ex.supporting)]
            trace = Trace(ex.question, "reader", lm.name)
            answer = answer_once(lm, builder, trace, ex.question, hits if setting == "gold" else None,
                                 96, time.perf_counter())
            score = score_answer(answer.final_answer, answer.text, ex.answers)
            em += score.em
            f1 += score.f1
            answers.append(answer.final_answer)
        n = len(examples)
        rows.append({"spec": spec, "style": getattr(lm, "prompt_style", "plain"), "answer": answer_style,
                     "reasoning": reasoning,
                     "exemplars": len(builder.exemplars), "setting": setting, "n": n,
                     "em": em / n, "f1": f1 / n, "s_per_q": (time.perf_counter() - started) / n, "load_s": load_s,
                     "answers": answers})
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    for row in rows:
        row["peak_rss_mib"] = peak
    return rows


SETTINGS = {"gold": "gold paragraphs", "closed-book": "closed book"}


def figures(rows: list[dict]) -> list[tuple]:
    """Each row's EM, F1 and seconds a question, and each model's peak memory, as a record's
    figures: named "EM, gold paragraphs, SPEC" and so on, one name per model and setting."""
    out, peaks = [], {}
    for row in rows:
        where = f"{SETTINGS.get(row['setting'], row['setting'])}, {row['spec']}"
        note = (f"n {row['n']}, prompt {row['style']}, answer {row['answer']}, reasoning {row['reasoning']}, "
                f"{row['exemplars']} exemplars")
        out += [(f"EM, {where}", row["em"], "EM", note), (f"F1, {where}", row["f1"], "F1", note),
                (f"s/question, {where}", row["s_per_q"], "s", None)]
        peaks[row["spec"]] = row["peak_rss_mib"]  # the child's peak: one a model, whatever the settings
    return out + [(f"peak RSS, {spec}", peak, "MiB", "the model's own process") for spec, peak in peaks.items()]


def write_record(args, rows: list[dict], started) -> None:
    from dynrag.reproduce.systems_record import systems_id, write_systems_record

    specs = list(dict.fromkeys(row["spec"] for row in rows))
    setting = f"{args.answer}-{args.reasoning}-{args.exemplars}shot-n{args.limit}"
    write_systems_record(
        args.record, systems_id("bench-reader", args.models, setting),
        f"Readers on HotpotQA with the gold paragraphs and closed book: {', '.join(specs) or 'none'}, "
        f"first {args.limit} questions", figures(rows), started=started, models=specs, data=[args.data],
        corpus="contexts", datasets=["hotpotqa"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="HotpotQA JSON file (questions with their gold paragraphs)")
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--models", default="bundled:smollm2,bundled:gemma3-270m",
                    help="comma-separated model specs (a spec's own options use &)")
    ap.add_argument("--settings", default="gold,closed-book")
    ap.add_argument("--answer", choices=("reasoned", "short"), default="reasoned",
                    help="reasoned: reasoning, then the answer phrase; short: the answer alone (methods' answer=short)")
    ap.add_argument("--exemplars", type=int, default=6, help="few-shot exemplars in the prompt")
    ap.add_argument("--reasoning", choices=("chain", "brief"), default="chain",
                    help="what chat readers are asked to write first (the methods' reasoning option)")
    ap.add_argument("--json", help="also append each row to this JSON-lines file")
    ap.add_argument("--record", metavar="DIR", help="also write the rows' figures as a systems result record in DIR")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # the child process: one model, rows as JSON on stdout
    args = ap.parse_args()
    settings = args.settings.split(",")
    if args.one:
        print(json.dumps(run_one(args.one, args.data, args.limit, settings, args.answer, args.exemplars,
                                 args.reasoning)))
        return
    from dynrag.reproduce.systems_record import Started

    started, finished = Started.now(), []
    print(f"HotpotQA, first {args.limit} questions; gold = the supporting paragraphs in the prompt; "
          f"answer {args.answer}, reasoning {args.reasoning}, {args.exemplars} exemplars", flush=True)
    print(f"{'model':<52}{'style':<7}{'setting':<13}{'EM':>7}{'F1':>7}{'s/q':>7}{'peak MiB':>10}", flush=True)
    for spec in args.models.split(","):
        child = subprocess.run(
            [sys.executable, __file__, "--data", args.data, "--limit", str(args.limit), "--settings", args.settings,
             "--answer", args.answer, "--exemplars", str(args.exemplars), "--reasoning", args.reasoning, "--one", spec],
            capture_output=True, text=True)
        if child.returncode != 0:
            print(f"{spec}: failed: {child.stderr.strip().splitlines()[-1:]}", flush=True)
            continue
        for row in json.loads(child.stdout.strip().splitlines()[-1]):
            print(f"{row['spec']:<52}{row['style']:<7}{row['setting']:<13}{row['em']:>7.3f}{row['f1']:>7.3f}"
                  f"{row['s_per_q']:>7.2f}{row['peak_rss_mib']:>10.0f}", flush=True)
            finished.append(row)
            if args.json:
                with open(args.json, "a", encoding="utf-8") as out:
                    out.write(json.dumps(row) + "\n")
    if args.record:
        write_record(args, finished, started)


if __name__ == "__main__":
    main()
