"""Where BM25Index's search time goes, against raw bm25s: the parts of one batch search timed apart.

    .venv/bin/python benchmarks/profile_bm25_search.py CORPUS.jsonl --questions HOTPOT_DEV.json [--repeats 7]

bench_bm25.py gives the end-to-end ratios; this splits them into query tokenizing
(ours and bm25s's Tokenizer), `bm25s.BM25.retrieve` on our index (memory-mapped, as `load`
opens it, and read into memory) and on a raw bm25s index of the same tokens, and the whole
`search_rows_batch` (ids) and `search_batch` (hits) calls, and making the hits of
given rows alone. Interleaved, best of --repeats after
a warm-up, CPU microseconds per query, so a gap shows which part to look at.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_bm25  # noqa: E402  (the same corpus, queries, raw bm25s index and timing loop)

from dynrag.corpus import read_passages  # noqa: E402
from dynrag.retrieval import BM25Index  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", help="JSONL corpus to index")
    ap.add_argument("--questions", required=True, help="HotpotQA JSON file whose questions are the queries")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("-k", type=int, default=10)
    args = ap.parse_args()
    queries, _ = bench_bm25.load_queries(args.questions, 1000)
    k = args.k
    with tempfile.TemporaryDirectory() as tmp:
        passages = list(read_passages(args.corpus))
        BM25Index.build(iter(passages), Path(tmp, "idx"), progress=False)
        mapped = BM25Index.load(Path(tmp, "idx"), backend="auto")
        in_ram = BM25Index.load(Path(tmp, "idx"), mmap=False, backend="auto")
        tok, _, _, raw, _ = bench_bm25.raw_bm25s(passages, mapped.backend, str(Path(tmp, "raw")))
        ours_ids = mapped._tokenizer.query_ids(queries)  # profiling reaches inside on purpose
        raw_ids = tok.tokenize(queries, update_vocab=False, return_as="ids", show_progress=False)
        rows, scores = mapped.search_rows_batch(queries, k)

        def raw_tokens():
            return tok.tokenize(queries, update_vocab=False, return_as="ids", show_progress=False)

        variants = {
            "our tokenizer (query_ids)": lambda: mapped._tokenizer.query_ids(queries),
            "bm25s Tokenizer.tokenize": raw_tokens,
            "bm25s retrieve, our index (mmap)": lambda: mapped._bm25.retrieve(
                ours_ids, k=k, show_progress=False, n_threads=0, return_as="tuple"),
            "bm25s retrieve, our index (in RAM)": lambda: in_ram._bm25.retrieve(
                ours_ids, k=k, show_progress=False, n_threads=0, return_as="tuple"),
            "bm25s retrieve, raw index": lambda: raw.retrieve(raw_ids, k=k, show_progress=False, n_threads=0),
            "search_rows_batch (mmap)": lambda: mapped.search_rows_batch(queries, k),
            "search_rows_batch (in RAM)": lambda: in_ram.search_rows_batch(queries, k),
            "search_batch (hits, mmap)": lambda: mapped.search_batch(queries, k),
            "hits from rows alone (store.hit_lists)": lambda: mapped.store.hit_lists(rows, scores),
            bench_bm25.RAW: lambda: raw.retrieve(raw_tokens(), k=k, show_progress=False, n_threads=0),
        }
        result = bench_bm25.best_of_interleaved(variants, len(queries), args.repeats)
        mapped.close()
        in_ram.close()
    reference = result[bench_bm25.RAW][1]
    print(f"{len(passages):,} passages, {len(queries):,} queries, k={k}, best of {args.repeats}")
    print("| part | CPU µs/query | q/s ÷ raw bm25s ids |\n| --- | ---: | ---: |")
    for name, (_, cpu_qps) in result.items():
        print(f"| {name} | {1e6 / cpu_qps:.1f} | {cpu_qps / reference:.3f} |")


if __name__ == "__main__":
    main()
