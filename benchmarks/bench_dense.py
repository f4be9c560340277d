"""Dense retrieval benchmark: encoding throughput, search throughput, hybrid overhead.

    .venv/bin/python benchmarks/bench_dense.py CORPUS.jsonl --questions HOTPOT_DEV.json [--limit 5000] [--queries 200]

1. Builds one index directory holding both parts (BM25Index.build, then DenseIndex.build_alongside,
   as `dynrag index --dense` does) from the first --limit passages, timing the dense part:
   passages/s of embedding + writing vectors.npy (the packaged all-MiniLM-L6-v2, torch on CPU).
2. Search throughput over --queries HotpotQA questions, in batches of 16, after a warm-up:
   dense end to end (query encoding + exact search + passage reads), the exact search alone on
   pre-encoded queries (numpy, and faiss IndexFlatIP when installed), BM25 (numpy backend) and
   hybrid (min-max, alpha 0.3, 50 candidates from each part).
3. Hybrid overhead: hybrid time / (BM25 time + dense time) at the same 50 candidates.
Times are the best of --repeats runs (other load on a shared machine only adds time).
The fusion step alone (min-max over 50 + 50 candidate hits, in Python) is timed on hit lists
retrieved beforehand, so its cost is not lost in the noise of query encoding.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BATCH = 16


def timed(fn, repeats: int) -> float:
    # The minimum, not the median: on a shared machine the noise only ever adds time.
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def in_batches(search, queries: list[str], k: int) -> None:
    for i in range(0, len(queries), BATCH):
        search(queries[i : i + BATCH], k)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", help="JSONL corpus to index")
    ap.add_argument("--limit", type=int, default=5000, help="passages to index (0 = all)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--questions", required=True, help="HotpotQA JSON file whose questions are the queries")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64, help="embedding batch size")
    args = ap.parse_args()

    import torch

    from dynrag.corpus import read_passages
    from dynrag.retrieval.bm25 import BM25Index
    from dynrag.retrieval.dense import DenseIndex, exact_top_k
    from dynrag.retrieval.embedder import Embedder
    from dynrag.retrieval.hybrid import HybridRetriever, fuse

    passages = read_passages(args.corpus)
    if args.limit:
        passages = itertools.islice(passages, args.limit)
    passages = list(passages)
    questions = [q["question"] for q in json.loads(Path(args.questions).read_text())]
    queries = list(itertools.islice(itertools.cycle(questions), args.queries))

    print(f"# dense benchmark: {len(passages)} passages from {args.corpus}, {len(queries)} queries")
    print(f"python {platform.python_version()}, torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} at start")
    t0 = time.perf_counter()
    embedder = Embedder.load()
    print(f"embedder load: {time.perf_counter() - t0:.1f} s")

    with tempfile.TemporaryDirectory(prefix="bench-dense-") as tmp:
        out = Path(tmp) / "index"
        t0 = time.perf_counter()
        BM25Index.build(passages, out, progress=False)
        t_bm25 = time.perf_counter() - t0
        t0 = time.perf_counter()
        DenseIndex.build_alongside(out, embedder, batch_size=args.batch_size, progress=False)
        t_dense = time.perf_counter() - t0
        size = (out / "dense" / "vectors.npy").stat().st_size
        print(f"BM25 build: {len(passages) / t_bm25:,.0f} passages/s")
        print(f"dense build (encode + write): {len(passages) / t_dense:,.1f} passages/s "
              f"({t_dense:.0f} s; vectors.npy {size / 2**20:.1f} MiB)")

        bm25 = BM25Index.load(out, backend="numpy")
        dense = DenseIndex.load(out, embedder, backend="numpy")
        hybrid = HybridRetriever(bm25, dense, alpha=0.3, candidates=50)
        qvecs = embedder.encode(queries, batch_size=BATCH)
        for part in (bm25, dense, hybrid):  # warm-up
            part.search_batch(queries[:BATCH], 10)

        results = {}
        results["query encoding only"] = timed(lambda: embedder.encode(queries, batch_size=BATCH), args.repeats)
        results["dense exact search only (numpy, k=10)"] = timed(
            lambda: [exact_top_k(dense.vectors, qvecs[i : i + BATCH], 10) for i in range(0, len(queries), BATCH)],
            args.repeats,
        )
        try:
            import faiss  # noqa: F401

            fdense = DenseIndex.load(out, embedder, backend="faiss")
            results["dense exact search only (faiss IndexFlatIP, k=10)"] = timed(
                lambda: [fdense.top_k(qvecs[i : i + BATCH], 10) for i in range(0, len(queries), BATCH)],
                args.repeats,
            )
        except ImportError:
            pass
        results["dense end to end (k=10)"] = timed(lambda: in_batches(dense.search_batch, queries, 10), args.repeats)
        results["bm25 (numpy, k=50)"] = timed(lambda: in_batches(bm25.search_batch, queries, 50), args.repeats)
        results["dense end to end (k=50)"] = timed(lambda: in_batches(dense.search_batch, queries, 50), args.repeats)
        results["hybrid minmax (50+50 candidates, k=10)"] = timed(
            lambda: in_batches(hybrid.search_batch, queries, 10), args.repeats
        )
        sparse_hits = bm25.search_batch(queries, 50)
        dense_hits = dense.search_batch(queries, 50)
        results["fusion step only (min-max, 50+50 -> 10)"] = timed(
            lambda: [fuse(s, d, 10, alpha=0.3) for s, d in zip(sparse_hits, dense_hits)], args.repeats
        )
        print()
        print("| search | queries/s |")
        print("| --- | ---: |")
        for name, seconds in results.items():
            print(f"| {name} | {len(queries) / seconds:,.1f} |")
        parts = results["bm25 (numpy, k=50)"] + results["dense end to end (k=50)"]
        fusion = results["fusion step only (min-max, 50+50 -> 10)"]
        print()
        print(f"hybrid overhead, measured: hybrid / (bm25 + dense) = "
              f"{results['hybrid minmax (50+50 candidates, k=10)'] / parts:.2f}")
        print(f"hybrid overhead, from the fusion step: (bm25 + dense + fusion) / (bm25 + dense) = "
              f"{(parts + fusion) / parts:.3f}; fusion {1000 * fusion / len(queries):.2f} ms/query")
        print(f"load average {os.getloadavg()[0]:.1f} at end")
        bm25.close()
        dense.close()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
