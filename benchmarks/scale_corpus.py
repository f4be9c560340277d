"""Corpora shaped like DPR's psgs_w100 (21M Wikipedia passages of 100 words), at any size, made
by resampling the sentences of a real corpus, so the words, their frequencies and the sentence
shapes are real while the count is what a benchmark needs.

    .venv/bin/python benchmarks/scale_corpus.py OUT.jsonl --source PASSAGES.jsonl [--passages 5000000]

Each passage: a title drawn with its first sentence's source passage, then sentences drawn
uniformly from the pool (one sentence at a time, with replacement) until at least 100 words, cut to
exactly 100 words as psgs_w100 cuts its passages. Seeded: the same arguments give the same file, and
the first N passages of a longer file are the N-passage corpus (passages are drawn independently),
so one 5M file serves the 100k and 1M points too (``itertools.islice``).

What it does not reproduce: the vocabulary stops growing at the source's (~a few hundred thousand
distinct words for a source of 21k Wikipedia passages), where real Wikipedia keeps adding rare words and names
(Heaps' law); ``vocabulary_growth`` measures that growth on the real source so a benchmark can
extrapolate the vocabulary's share of memory separately. Generated files belong in a scratch
directory outside the repository: they are never committed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

WORDS = 100


def sentence_pool(source: str) -> tuple[list[str], list[int], list[str], list[int]]:
    """(sentences, their word counts, titles, the title index of each sentence)."""
    from dynrag.text.sentences import split_sentences

    sentences: list[str] = []
    counts: list[int] = []
    titles: list[str] = []
    owner: list[int] = []
    with open(source, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            record = json.loads(line)
            titles.append(record.get("title", ""))
            for sentence in split_sentences(record["text"]):
                n = len(sentence.split())
                if n:
                    sentences.append(sentence)
                    counts.append(n)
                    owner.append(len(titles) - 1)
    return sentences, counts, titles, owner


def generate(out: Path, passages: int, source: str, seed: int = 0, progress: bool = True) -> Path:
    """Write ``passages`` JSONL records {id, title, text} to ``out`` (atomically: temp + rename)."""
    sentences, counts, titles, owner = sentence_pool(source)
    rng = np.random.default_rng(seed)
    mean_words = float(np.mean(counts))
    per_passage = int(WORDS / mean_words) + 4  # draws per passage, with room to spare
    tmp = out.with_name(out.name + ".partial")
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    block = 10_000
    with open(tmp, "w", encoding="utf-8") as f:
        for start in range(0, passages, block):
            n = min(block, passages - start)
            draws = rng.integers(0, len(sentences), size=(n, per_passage))
            lines = []
            for i in range(n):
                picks = draws[i]
                words: list[str] = []
                j = 0
                while len(words) < WORDS:
                    if j == len(picks):  # rare: many very short sentences in a row
                        picks = rng.integers(0, len(sentences), size=per_passage)
                        j = 0
                    words.extend(sentences[picks[j]].split())
                    j += 1
                record = {"id": f"s{start + i}", "title": titles[owner[draws[i][0]]], "text": " ".join(words[:WORDS])}
                lines.append(json.dumps(record, ensure_ascii=False))
            f.write("\n".join(lines) + "\n")
            if progress and (start // block) % 50 == 0:
                rate = (start + n) / (time.perf_counter() - started)
                print(f"  {start + n:,} passages ({rate:,.0f}/s)", file=sys.stderr, flush=True)
    tmp.rename(out)
    return out


def vocabulary_growth(source: str, points: int = 6) -> list[tuple[int, int]]:
    """(passages, distinct stems) over growing prefixes of the real source, in bm25s's tokens."""
    from dynrag.corpus import read_passages
    from dynrag.retrieval.tokenizer import BM25Tokenizer

    tokenizer = BM25Tokenizer(None, grow=True)
    texts = [f"{p.title}\n{p.text}" for p in read_passages(source)]
    marks = sorted({int(len(texts) * (i + 1) / points) for i in range(points)})
    out, done = [], 0
    for mark in marks:
        tokenizer.corpus_batch(texts[done:mark])
        done = mark
        out.append((mark, len(tokenizer.stem_to_id) - 1))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--passages", type=int, default=5_000_000)
    ap.add_argument("--source", required=True, help="the real JSONL corpus whose sentences are resampled")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    generate(args.out, args.passages, args.source, args.seed)
    print(f"wrote {args.passages:,} passages to {args.out} in {time.perf_counter() - t0:.0f} s "
          f"({args.out.stat().st_size / 2**30:.2f} GiB)")


if __name__ == "__main__":
    main()
