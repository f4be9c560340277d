"""How often DRAGIN's `reference` variant retrieves on a stopword-only trigger.

The released DRAGIN code fires as soon as any word's entropy × attention passes theta and applies
its stopword filter only afterwards, to build the query; when every word over theta is a
stopword, the query falls back to the first content words (roughly the question).
`stopword_trigger=authors` keeps that rule, `skip` does not fire there. This script answers the
questions of a finished `dynrag eval` / `dynrag reproduce` run directory again with that run's
own configuration, reads each retrieval's reason from the trace and counts the stopword-only
triggers. It also counts the answers that equal the run's predictions (greedy decoding: all of
them, unless a near tie rounds differently).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/dragin_stopword_trigger.py RUN_DIR [--log FILE]

Each answer is appended to the --log JSONL as it finishes; running the command again skips what
is logged, so a killed run resumes. The report is computed from the log.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dynrag.datasets.loaders import load_examples
from dynrag.io.jsonl import JsonlAppender, read_jsonl
from dynrag.retrieval.bm25 import BM25Index
from dynrag.run.assemble import method_from_saved

STOPWORD_ONLY = "at stopwords only"  # the reference variant's reason for such a trigger (methods/dragin/method.py)


def answer_all(run: Path, log: Path) -> None:
    config = json.loads((run / "config.json").read_text())
    options = config["options"]
    if config["method"] != "dragin" or options.get("variant") != "reference":
        sys.exit(f"{run}: not a dragin run of the reference variant (method {config['method']}, "
                 f"variant {options.get('variant')})")
    predictions = {r["id"]: r for r in read_jsonl(run / "predictions.jsonl")}
    done = {r["id"] for r in read_jsonl(log, repair=True)}
    examples = [ex for ex in load_examples(config["dataset"], config["data"], limit=config.get("limit"))
                if ex.id in predictions and ex.id not in done]
    if not examples:
        return
    index = BM25Index.load(run / "contexts-index", backend="numpy")
    method = method_from_saved(config, index, progress=False)
    with JsonlAppender(log) as out:
        for i, ex in enumerate(examples):
            answer = method.answer(ex.question)
            reasons = [r.reason for r in answer.trace.retrievals]
            out.append({
                "id": ex.id, "retrievals": len(reasons), "reasons": reasons,
                "stopword_only": sum(STOPWORD_ONLY in r for r in reasons),
                "same_as_run": answer.text == predictions[ex.id]["prediction"],
                "stopword_trigger": answer.trace.options.get("stopword_trigger"),
            })
            print(f"[{i + 1}/{len(examples)}] {ex.id}: {len(reasons)} retrievals", file=sys.stderr, flush=True)


def report(log: Path) -> str:
    records = read_jsonl(log)
    n = len(records)
    retrievals = sum(r["retrievals"] for r in records)
    stopword = sum(r["stopword_only"] for r in records)
    questions = sum(r["stopword_only"] > 0 for r in records)
    same = sum(r["same_as_run"] for r in records)
    rules = sorted({str(r["stopword_trigger"]) for r in records})
    return "\n".join([
        "| questions | retrievals | stopword-only triggers | share of retrievals | questions with one | "
        "answers equal to the run's | stopword_trigger |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        f"| {n} | {retrievals} | {stopword} | {stopword / retrievals if retrievals else 0:.3f} | {questions} | "
        f"{same}/{n} | {', '.join(rules)} |",
    ]) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a finished dragin run directory (variant=reference)")
    ap.add_argument("--log", type=Path, help="per-answer JSONL (default RUN/stopword_trigger.jsonl)")
    args = ap.parse_args()
    log = args.log or args.run / "stopword_trigger.jsonl"
    answer_all(args.run, log)
    sys.stdout.write(report(log))


if __name__ == "__main__":
    main()
