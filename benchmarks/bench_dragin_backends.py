"""DRAGIN on three paths in one process, on the same questions: transformers (float32 weights,
attention from its own forward passes), the former llama.cpp hybrid (llama.cpp decodes, the float32
transformers copy of the same weights reads the attention: lm/llama_attention.py) and llama.cpp
alone (attention read from its own graph: lm/llama_graph_attention.py). FLARE on llama.cpp runs
beside them for the cost of a generated token without attention. Prints seconds a question, time a
generated token, the speed ratios and how often each llama.cpp path agrees with transformers on
the final answer, on every retrieval query and on every retrieval decision.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_dragin_backends.py --data HOTPOT_DEV.json \
        --limit 50 --model bundled:qwen2.5-0.5b --variant paper [--variant reference] [--out rows.jsonl]

    # peak memory of one process per path (a question each), with and without the float32 copy
    .venv/bin/python benchmarks/bench_dragin_backends.py --data HOTPOT_DEV.json --memory

With --record DIR the printed ratios, agreements and (with --memory) peak memories are also
written as a systems result record in DIR (docs/results-records.md).

Questions are HotpotQA's, retrieving with BM25 from the pooled context paragraphs of the loaded
questions (as `eval --corpus contexts`), top 3. `paper` runs at its defaults; `reference` with
the settings of `reproduce dragin-table2` on HotpotQA (the authors' released Llama2-13b-chat
values). The paths take turns answering first, so none always finds the machine warmer. With
--out, each question's rows are appended as JSON lines and a rerun skips what is there.
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

from dynrag.datasets.loaders import load_examples
from dynrag.eval.pool import pool_contexts
from dynrag.lm import load_lm
from dynrag.lm.base import Prompt
from dynrag.lm.llama_attention import generate_with_attention
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.registry import build_method
from dynrag.reproduce.dragin import dragin_runs
from dynrag.retrieval.bm25 import BM25Index


class HybridAttention:
    """The former ``?backend=llama.cpp`` DRAGIN path, rebuilt as the reference to beat: llama.cpp
    decodes and the float32 transformers copy reads each block's attention afterwards."""

    def __init__(self, fast, reader):
        self.fast, self.reader = fast, reader

    def __getattr__(self, name):
        return getattr(self.fast, name)

    def generate(self, prompt, max_new_tokens, stop=(), capture_attention=False, stop_after=(), stop_when=None):
        prompt = Prompt.of(prompt)
        tokens = self.fast.prompt_tokens(prompt)
        if capture_attention:
            return generate_with_attention(self.fast, self.reader, prompt, tokens, max_new_tokens, stop, stop_after,
                                           stop_when)
        return self.fast.decode_from(prompt, tokens, max_new_tokens, stop, stop_after, stop_when)

    def attention_pass(self, token_ids, per_head=False, bos=True):
        return self.reader.attention_pass(token_ids, per_head=per_head, bos=bos)


def variant_options(variant: str) -> dict:
    if variant == "reference":
        (run,) = dragin_runs("Llama2-13b-chat", ["hotpotqa"], ["dragin"])
        return {**run.options, "k": 3}
    return {"variant": "paper", "k": 3}


def llama_spec(model: str) -> str:
    return f"{model}{'&' if '?' in model else '?'}backend=llama.cpp"


def pooled_index(examples) -> BM25Index:
    folder = Path(tempfile.mkdtemp(prefix="bench-dragin-"))
    BM25Index.build(pool_contexts(examples), folder / "index", progress=False)
    return BM25Index.load(folder / "index", backend="numpy")


def run_speed(args) -> list[tuple]:
    examples = list(load_examples("hotpotqa", args.data, limit=args.limit))
    index = pooled_index(examples)
    fast = load_lm(llama_spec(args.model), progress=False)
    # Each path its own model objects, so no path reuses another's key/value cache.
    hybrid = HybridAttention(load_lm(llama_spec(args.model), progress=False), load_lm(args.model, progress=False))
    lms = {"transformers": load_lm(args.model, progress=False), "hybrid": hybrid, "llama.cpp": fast}
    builder = PromptBuilder.for_dataset("hotpotqa")
    out = Path(args.out) if args.out else None
    done = set()
    if out and out.exists():
        done = {(r["variant"], r["id"]) for r in map(json.loads, out.read_text().splitlines())}
    figures: list[tuple] = []
    for variant in args.variant or ["paper"]:
        methods = {name: build_method("dragin", lm, index, variant_options(variant), builder) for name, lm in lms.items()}
        methods["flare on llama.cpp"] = build_method("flare", fast, index, {"k": 3}, builder)
        rows = []
        for i, ex in enumerate(examples):
            if (variant, ex.id) in done:
                continue
            names = list(methods)
            order = names[i % len(names):] + names[: i % len(names)]
            row = {"variant": variant, "id": ex.id}
            for name in order:
                started = time.perf_counter()
                answer = methods[name].answer(ex.question)
                row[name] = {"seconds": time.perf_counter() - started, "tokens": answer.trace.generated_tokens,
                             "final": answer.final_answer.strip(), "queries": [r.query for r in answer.trace.retrievals],
                             "retrievals": len(answer.trace.retrievals)}
            rows.append(row)
            if out:
                with out.open("a") as f:
                    f.write(json.dumps(row) + "\n")
            print(f"{variant} {i + 1}/{len(examples)} " + " ".join(
                f"{n}={row[n]['seconds']:.1f}s" for n in methods), file=sys.stderr, flush=True)
        if out:
            rows = [r for r in map(json.loads, out.read_text().splitlines()) if r["variant"] == variant]
        figures += report(variant, args.model, rows, list(methods))
    return figures


def report(variant: str, model: str, rows: list[dict], names: list[str]) -> list[tuple]:
    """Print one variant's speeds and agreements; returns them as a record's figures."""
    n = len(rows)
    if not n:
        return []
    total = {name: sum(r[name]["seconds"] for r in rows) for name in names}
    tokens = {name: sum(r[name]["tokens"] for r in rows) for name in names}
    print(f"dragin variant={variant}, {model}, {n} HotpotQA questions, BM25 over their pooled paragraphs")
    for name in names:
        print(f"  {name:<19} {total[name] / n:6.2f} s/question  {1000 * total[name] / max(tokens[name], 1):7.1f} ms/generated token"
              f"  {sum(r[name]['retrievals'] for r in rows) / n:4.2f} retrievals/question")
    print(f"  llama.cpp against the hybrid it replaces: {total['hybrid'] / total['llama.cpp']:.2f}x faster a question")
    print(f"  llama.cpp against transformers: {total['transformers'] / total['llama.cpp']:.2f}x faster a question")
    per_token = (total["llama.cpp"] / max(tokens["llama.cpp"], 1)) / (
        total["flare on llama.cpp"] / max(tokens["flare on llama.cpp"], 1))
    print(f"  dragin's time a generated token / flare's, both on llama.cpp: {per_token:.2f}")
    on = f"{n} HotpotQA questions"
    figures = [(f"{variant} variant s/question, {name}", total[name] / n, "s",
                f"{1000 * total[name] / max(tokens[name], 1):.1f} ms a generated token; {on}") for name in names]
    figures += [
        (f"{variant} variant s/question, transformers ÷ llama.cpp", total["transformers"] / total["llama.cpp"], "x",
         on),
        (f"{variant} variant s/question, hybrid ÷ llama.cpp", total["hybrid"] / total["llama.cpp"], "x", on),
        (f"{variant} variant time a generated token, dragin ÷ flare, both on llama.cpp", per_token, "x", on),
    ]
    for name in ("llama.cpp", "hybrid"):
        same = sum(r[name]["final"] == r["transformers"]["final"] for r in rows)
        queries = sum(r[name]["queries"] == r["transformers"]["queries"] for r in rows)
        fired = sum(bool(r[name]["retrievals"]) == bool(r["transformers"]["retrievals"]) for r in rows)
        print(f"  {name} vs transformers: identical final answers {same}/{n}, identical retrieval queries "
              f"{queries}/{n}, same decision to retrieve at all {fired}/{n}")
        # Shares, so runs of different lengths compare; the counts themselves go in the note.
        figures += [(f"{variant} variant {name} vs transformers: {what}", count / n, "share", f"{count} of {n}")
                    for what, count in (("identical final answers", same), ("identical retrieval queries", queries),
                                        ("same decision to retrieve at all", fired))]
    return figures


def run_memory(args) -> list[tuple]:
    """Peak resident memory of a fresh process answering one question on each path."""
    figures = []
    for path in ("llama.cpp", "hybrid", "transformers"):
        result = subprocess.run([sys.executable, __file__, "--data", args.data, "--model", args.model,
                                 "--memory-one", path], capture_output=True, text=True, check=True)
        *shown, measured = result.stdout.strip().splitlines()  # the child's last line is its figure as JSON
        print("\n".join(shown))
        figures.append((f"dragin peak resident memory, {path}", json.loads(measured)["peak_gb"], "GB",
                        "a fresh process answering one HotpotQA question, paper variant"))
    return figures


def run_memory_one(args) -> None:
    examples = list(load_examples("hotpotqa", args.data, limit=1))
    index = pooled_index(examples)
    path = args.memory_one
    if path == "transformers":
        lm = load_lm(args.model, progress=False)
    else:
        lm = load_lm(llama_spec(args.model), progress=False)
        if path == "hybrid":
            lm = HybridAttention(lm, load_lm(args.model, progress=False))
    build_method("dragin", lm, index, {"variant": "paper", "k": 3}, PromptBuilder.for_dataset("hotpotqa")).answer(
        examples[0].question)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 / 1024
    print(f"  {args.model} dragin on {path:<13} peak resident memory {peak:5.2f} GB")
    print(json.dumps({"peak_gb": peak}))


def write_record(args, figures: list[tuple], started) -> None:
    from dynrag.reproduce.systems_record import systems_id, write_systems_record

    if args.memory:
        setting, title = "memory", "peak resident memory of DRAGIN on transformers, llama.cpp and the hybrid"
    else:
        variants = args.variant or ["paper"]
        setting = f"{'+'.join(variants)}-n{args.limit}"
        title = (f"DRAGIN on llama.cpp against transformers and the former hybrid, {', '.join(variants)} "
                 f"variant, {args.limit} HotpotQA questions")
    write_systems_record(args.record, systems_id("bench-dragin-backends", args.model, setting),
                         f"{title} ({args.model})", figures, started=started, models=[args.model],
                         data=[args.data], corpus="contexts", datasets=["hotpotqa"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="HotpotQA JSON file")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--model", default="bundled:qwen2.5-0.5b")
    ap.add_argument("--variant", action="append", choices=["paper", "reference"])
    ap.add_argument("--out", help="JSONL of each question's rows; a rerun resumes it")
    ap.add_argument("--memory", action="store_true", help="peak memory of each path instead of speed")
    ap.add_argument("--record", metavar="DIR", help="also write the figures as a systems result record in DIR")
    ap.add_argument("--memory-one", choices=["llama.cpp", "hybrid", "transformers"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_one:
        run_memory_one(args)
        return
    from dynrag.reproduce.systems_record import Started

    started = Started.now()
    figures = run_memory(args) if args.memory else run_speed(args)
    if args.record:
        write_record(args, figures, started)


if __name__ == "__main__":
    main()
