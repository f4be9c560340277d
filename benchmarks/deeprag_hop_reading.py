"""How well a target model answers one DeepRAG sub-question from passages, by prompt style.

For 2WikiMultihopQA records, the first evidence triple (subject, relation, object) becomes the
sub-question synthesis would ask (the dataset teacher's wording), the subject's own paragraph is
put first among three of the record's paragraphs, and the model writes the intermediate answer in
the narrative exactly as synthesis asks for it. Correct: the normalised object inside the
normalised answer. Each style and shot count reads the same questions, so the rows are paired.

    python benchmarks/deeprag_hop_reading.py --data TRAIN.jsonl --skip 200 --limit 16 \\
        --model 'bundled:qwen2.5-0.5b?backend=llama.cpp' --shots 4,0
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from dynrag.corpus.passage import Passage
from dynrag.datasets.metrics import normalize_answer
from dynrag.deeprag.teachers import RELATION_QUESTIONS
from dynrag.lm import load_lm
from dynrag.lm.chat import frame_of
from dynrag.methods.deeprag.narrative import Narrative
from dynrag.methods.deeprag.writer import NarrativeWriter


def first_hops(path: Path, skip: int, limit: int):
    """(question, sub-question, gold object, three passages with the subject's first) per usable record."""
    with open(path, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()][skip : skip + limit]
    for record in records:
        subject, relation, obj = record["evidences"][0]
        template = RELATION_QUESTIONS.get(relation.lower())
        paragraphs = {title: " ".join(sentences) for title, sentences in record["context"]}
        gold = subject if subject in paragraphs else next((t for t in paragraphs if subject.lower() in t.lower()), None)
        if template is None or gold is None:
            continue
        others = [t for t in paragraphs if t != gold][:2]
        passages = [Passage("gold", gold, paragraphs[gold])] + [Passage(f"other{i}", t, paragraphs[t]) for i, t in enumerate(others)]
        yield record["question"], template.format(x=subject), obj, passages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="2WikiMultihopQA records (JSONL), a train slice")
    parser.add_argument("--model", default="bundled:qwen2.5-0.5b?backend=llama.cpp")
    parser.add_argument("--skip", type=int, default=200)
    parser.add_argument("--limit", type=int, default=16)
    parser.add_argument("--shots", default="4,0", help="worked-example counts to compare, comma-separated")
    args = parser.parse_args()

    lm = load_lm(args.model)
    frame = frame_of(lm)
    if frame is None:
        raise SystemExit(f"{args.model} is not prompted in the chat style: nothing to compare")
    writers = {(style, shots): NarrativeWriter(lm, Narrative(shots=shots, frame=frame if style == "chat" else None))
               for style in ("plain", "chat") for shots in (int(s) for s in args.shots.split(","))}
    right = dict.fromkeys(writers, 0)
    total = 0
    for question, subquery, obj, passages in first_hops(args.data, args.skip, args.limit):
        total += 1
        cells = []
        for key, writer in writers.items():
            answer, _ = writer.answer(question, [], subquery, passages)
            ok = normalize_answer(obj) in normalize_answer(answer)
            right[key] += ok
            cells.append(f"{key[0]}/{key[1]}: {answer[:40]!r} {'right' if ok else 'wrong'}")
        print(f"{subquery} [{obj}] " + " | ".join(cells), flush=True)
    print(f"\n| style | worked examples | right | of | share |\n| --- | ---: | ---: | ---: | ---: |")
    for (style, shots), n in right.items():
        print(f"| {style} | {shots} | {n} | {total} | {n / max(total, 1):.3f} |")


if __name__ == "__main__":
    main()
