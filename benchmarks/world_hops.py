"""Why multi-hop world questions sit at the floor: per-hop passage recall of finished runs, and two
upper bounds for the reader.

    # which hop's supporting passage each finished run retrieved (no model needed)
    python benchmarks/world_hops.py recall --world W RUN_DIR [RUN_DIR ...]
    # the reader with every gold passage of the question in the methods' reasoned prompt
    python benchmarks/world_hops.py oracle --world W --model M [--limit N]
    # the gold sub-questions asked in turn (#k replaced by the reader's own k-th answer), each
    # searched with BM25 (top 3) over the world's corpus and answered in the short style
    python benchmarks/world_hops.py decomposed --world W --model M [--limit N]

``--limit N`` takes the multi-hop questions among the first N of the test split, the questions
`reproduce world --limit N` asks. A run's record names the passages it retrieved; the world's test
record names each hop's supporting paragraph, matched to the corpus by title and text.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_questions(world: Path, limit: int | None) -> list[dict]:
    return read_jsonl(world / "test.jsonl")[:limit]


def hop_passage_ids(world: Path) -> dict[str, list[str]]:
    """Question id -> the corpus id of each hop's supporting passage, in hop order."""
    corpus = {(p["title"], p["text"]): p["id"] for p in read_jsonl(world / "corpus.jsonl")}
    out = {}
    for q in read_jsonl(world / "test.jsonl"):
        paragraphs = q["paragraphs"]
        out[q["id"]] = [corpus.get((paragraphs[h["paragraph_support_idx"]]["title"],
                                    paragraphs[h["paragraph_support_idx"]]["paragraph_text"]), "")
                        for h in q["question_decomposition"]]
    return out


def recall(world: Path, run_dirs: list[Path]) -> None:
    hops_of = {q["id"]: q["world"]["hops"] for q in read_jsonl(world / "test.jsonl")}
    passages = hop_passage_ids(world)
    print("| run | n (2 / 3 hops) | EM 2 hops | EM 3 hops | 2 hops: hop 1, 2 retrieved | 3 hops: hop 1, 2, 3 retrieved |")
    print("| --- | --- | ---: | ---: | --- | --- |")
    for run in run_dirs:
        em: dict[int, list[float]] = defaultdict(list)
        found: dict[tuple[int, int], list[bool]] = defaultdict(list)
        for r in read_jsonl(run / "predictions.jsonl"):
            n_hops = hops_of.get(r["id"], 1)
            if n_hops < 2:
                continue
            em[n_hops].append(r["em"])
            retrieved = set(r.get("retrieved_ids") or ())
            for k, pid in enumerate(passages[r["id"]]):
                found[(n_hops, k + 1)].append(pid in retrieved)

        def share(values: list) -> str:
            return f"{sum(values) / len(values):.2f}" if values else "–"

        cells = [", ".join(share(found[(h, k)]) for k in range(1, h + 1)) for h in (2, 3)]
        print(f"| {run.name} | {len(em[2])} / {len(em[3])} | {share(em[2])} | {share(em[3])} | {cells[0]} | {cells[1]} |")


def read_questions(world: Path, model: str, limit: int | None, decomposed: bool) -> None:
    from dynrag.corpus import read_passages
    from dynrag.datasets.metrics import exact_match
    from dynrag.lm import load_lm
    from dynrag.methods.answering import answer_once
    from dynrag.methods.base import Trace
    from dynrag.methods.prompting import PromptBuilder
    from dynrag.retrieval.base import Hit
    from dynrag.retrieval.factory import open_retriever
    from dynrag.retrieval.index_build import build_index

    questions = [q for q in test_questions(world, limit) if q["world"]["hops"] >= 2]
    lm = load_lm(model, progress=False)
    builder = PromptBuilder.for_dataset("musique")  # the world's worked examples
    retriever = None
    work = Path(tempfile.mkdtemp(prefix="world-hops-"))
    if decomposed:
        builder = builder.answering_short()
        build_index(read_passages(world / "corpus.jsonl"), work / "index", progress=False)
        retriever = open_retriever("bm25", work / "index", None, work_dir=work, progress=False)
    em: dict[int, list[float]] = defaultdict(list)
    hop_right: dict[tuple[int, int], list[bool]] = defaultdict(list)
    started = time.perf_counter()
    for q in questions:
        n_hops = q["world"]["hops"]
        golds = [q["answer"], *q.get("answer_aliases", [])]
        if not decomposed:
            gold = [p for p in q["paragraphs"] if p["is_supporting"]]
            hits = [Hit(f"gold-{i}", p["title"], p["paragraph_text"], 1.0) for i, p in enumerate(gold)]
            answer = answer_once(lm, builder, Trace(q["question"], "oracle", model), q["question"], hits, 96,
                                 time.perf_counter())
            em[n_hops].append(exact_match(answer.final_answer, golds))
            continue
        answers: list[str] = []
        for k, hop in enumerate(q["question_decomposition"]):
            sub = hop["question"]
            for j, earlier in enumerate(answers):
                sub = sub.replace(f"#{j + 1}", earlier)
            hits = retriever.search(sub, 3)
            answer = answer_once(lm, builder, Trace(sub, "decomposed", model), sub, hits, 32, time.perf_counter())
            answers.append(answer.final_answer)
            hop_right[(n_hops, k + 1)].append(exact_match(answer.final_answer, [hop["answer"]]) > 0)
        if q["world"]["kind"] != "comparison":  # a comparison's last hop is not its answer
            em[n_hops].append(exact_match(answers[-1], golds))
    seconds = time.perf_counter() - started
    for n_hops, values in sorted(em.items()):
        print(f"{n_hops} hops: EM {sum(values) / len(values):.3f} (n {len(values)})")
    for (n_hops, k), values in sorted(hop_right.items()):
        print(f"{n_hops} hops, hop {k} answered right: {sum(values) / len(values):.2f} (n {len(values)})")
    print(f"{seconds / max(len(questions), 1):.2f} s a question ({len(questions)} questions)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("recall", "oracle", "decomposed"))
    ap.add_argument("runs", nargs="*", type=Path, help="recall: finished `reproduce world` run directories")
    ap.add_argument("--world", type=Path, required=True)
    ap.add_argument("--model", default="bundled:qwen2.5-0.5b?backend=llama.cpp")
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_intermixed_args()
    if args.what == "recall":
        if not args.runs:
            ap.error("recall needs at least one run directory")
        recall(args.world, args.runs)
    else:
        read_questions(args.world, args.model, args.limit, args.what == "decomposed")


if __name__ == "__main__":
    main()
