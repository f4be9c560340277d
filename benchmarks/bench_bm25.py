"""BM25 benchmark: BM25Index ingest speed and memory, search throughput against raw bm25s and rank_bm25.

    .venv/bin/python benchmarks/bench_bm25.py CORPUS.jsonl --questions HOTPOT_DEV.json [--results FILE] \
        [--record results/]

Ingest runs in fresh subprocesses (full corpus and its first half) so that peak RSS is measured
per build; search runs in this process after a warm-up (numba compiles on the first call).
All BM25 variants use the same tokens (lower-case, bm25s "en" stopwords, Snowball English
stems, title + text) and the same bm25s backend and thread count.

Raw bm25s is measured three ways, because dynrag returns passages (id, title, text) and raw
bm25s by default returns only row numbers:
  ids       tokenize + retrieve: row numbers and scores only -- the reference of the speed goals:
            `search_batch` (hits whose strings are read when first asked for) >= 0.85x on the
            corpus and >= 0.9x on it repeated 5x, `search_rows_batch` (ids only) >= 0.95x on both
  +docs RAM retrieve(corpus=list of dicts): passages held in memory
  +docs mmap bm25s's own disk-backed corpus (save(corpus=...), load(mmap=True, load_corpus=True))
dynrag is also timed reading the text of every hit it returns, what a caller that shows all of
them pays.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import platform
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

# search_batch / raw ids on the corpus and on it repeated --scale times, ids / raw ids on both
GOALS = {"hits": 0.85, "hits_scaled": 0.9, "ids": 0.95, "rank_bm25": 100.0, "ingest": 15_000.0}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def cpu_seconds() -> float:
    # Reported next to wall time: on a shared machine other jobs stretch wall time, not CPU time.
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ---- ingest (run in a child process) ---------------------------------------------------------


def child_build(corpus: str, limit: int, out: str) -> None:
    from dynrag.corpus import read_passages
    from dynrag.retrieval import BM25Index

    before = peak_rss_mb()
    start, cpu = time.perf_counter(), cpu_seconds()
    passages = itertools.islice(read_passages(corpus), limit)
    manifest = BM25Index.build(passages, out, progress=False)
    seconds = time.perf_counter() - start
    print(json.dumps({
        "passages": manifest["passage_count"],
        "seconds": seconds,
        "cpu_seconds": cpu_seconds() - cpu,
        "peak_growth_mb": peak_rss_mb() - before,
        "baseline_mb": before,
    }))


def child_raw_build(corpus: str, limit: int) -> None:
    # How a plain bm25s user builds: all texts in a list, tokenize, index (context for memory).
    import bm25s
    import Stemmer
    from bm25s.tokenization import Tokenizer

    from dynrag.corpus import read_passages

    before = peak_rss_mb()
    start, cpu = time.perf_counter(), cpu_seconds()
    texts = [f"{p.title}\n{p.text}" for p in itertools.islice(read_passages(corpus), limit)]
    tok = Tokenizer(lower=True, stopwords="en", stemmer=Stemmer.Stemmer("english"))
    ids = tok.tokenize(texts, update_vocab=True, return_as="ids", show_progress=False)
    retriever = bm25s.BM25(backend="numpy")
    retriever.index((ids, tok.stem_to_sid), show_progress=False)
    seconds = time.perf_counter() - start
    print(json.dumps({
        "passages": len(texts),
        "seconds": seconds,
        "cpu_seconds": cpu_seconds() - cpu,
        "peak_growth_mb": peak_rss_mb() - before,
    }))


def run_child(args: list[str]) -> dict:
    cmd = [sys.executable, __file__, *args]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---- search ----------------------------------------------------------------------------------


def load_queries(path: str, minimum: int) -> tuple[list[str], int]:
    questions = [q["question"] for q in json.loads(Path(path).read_text(encoding="utf-8"))]
    repeats = -(-minimum // len(questions))
    return questions * repeats, len(questions)


def time_qps(fn, n_queries: int) -> tuple[float, float]:
    """Queries per second by wall clock and by this process's CPU time (all variants are
    single-threaded, so CPU time is the wall time minus waiting for a core on a busy machine)."""
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    return n_queries / (time.perf_counter() - start), n_queries / (time.process_time() - cpu)


def best_of_interleaved(variants: dict, n_queries: int, repeats: int) -> dict:
    for fn in variants.values():  # warm-up: numba compilation, page cache, word caches
        fn()
    wall: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):  # interleaved so that machine noise hits all variants alike
        for name, fn in variants.items():
            w, c = time_qps(fn, n_queries)
            wall[name].append(w)
            cpu[name].append(c)
    # Best of the runs, as timeit reports: on a shared machine the slower runs measure the
    # other jobs; the ratios use runs taken side by side.
    return {name: (max(wall[name]), max(cpu[name])) for name in variants}


def raw_bm25s(passages: list, backend: str, save_dir: str):
    """A plain bm25s index of the same texts and tokens, and a copy saved with its corpus and
    loaded back memory-mapped (bm25s's own way of returning documents from disk)."""
    import bm25s
    import Stemmer
    from bm25s.tokenization import Tokenizer

    docs = [p.to_dict() for p in passages]
    tok = Tokenizer(lower=True, stopwords="en", stemmer=Stemmer.Stemmer("english"))
    corpus_ids = tok.tokenize([f"{p.title}\n{p.text}" for p in passages], update_vocab=True,
                              return_as="ids", show_progress=False)
    raw = bm25s.BM25(backend=backend)
    raw.index((corpus_ids, tok.stem_to_sid), show_progress=False)
    raw.save(save_dir, corpus=docs, show_progress=False)
    raw_mm = bm25s.BM25.load(save_dir, mmap=True, load_corpus=True, show_progress=False,
                             backend=backend)
    return tok, corpus_ids, docs, raw, raw_mm


# Rows and scores only, no passage read: the like-for-like match of raw bm25s's ids.
HITS = "dynrag BM25Index.search_batch"
ROWS = "dynrag BM25Index.search_rows_batch (ids only)"
READ = "dynrag search_batch, every hit's text read"
RAW = "raw bm25s ids"


def read_all(batch) -> int:
    return sum(len(h.text) + len(h.title) + len(h.id) for hits in batch for h in hits)


def bench_search(index_dir: str, corpus: str, queries: list[str], args, tmp: str) -> dict:
    import numpy as np
    from rank_bm25 import BM25Okapi

    from dynrag.corpus import read_passages
    from dynrag.retrieval import BM25Index

    k, n_threads = args.k, args.n_threads
    index = BM25Index.load(index_dir, backend="auto", n_threads=n_threads)
    backend = index.backend
    tok, corpus_ids, docs, raw, raw_mm = raw_bm25s(
        list(read_passages(corpus)), backend, str(Path(tmp, "raw"))
    )

    def raw_tokens():
        return tok.tokenize(queries, update_vocab=False, return_as="ids", show_progress=False)

    variants = {
        HITS: lambda: index.search_batch(queries, k),
        ROWS: lambda: index.search_rows_batch(queries, k),
        READ: lambda: read_all(index.search_batch(queries, k)),
        RAW: lambda: raw.retrieve(raw_tokens(), k=k, show_progress=False, n_threads=n_threads),
        "raw bm25s +docs RAM": lambda: raw.retrieve(raw_tokens(), corpus=docs, k=k,
                                                    show_progress=False, n_threads=n_threads),
        "raw bm25s +docs mmap": lambda: raw_mm.retrieve(raw_tokens(), k=k, show_progress=False,
                                                        n_threads=n_threads),
    }
    result = best_of_interleaved(variants, len(queries), args.repeats)

    # Same ranking as raw bm25s? (ids of hits with a positive score, in order)
    ours = index.search_batch(queries, k)
    theirs_docs, theirs_scores = raw.retrieve(raw_tokens(), k=k, show_progress=False)
    same = sum(
        [h.id for h in hits] == [docs[i]["id"] for i, s in zip(d, s_) if s > 0]
        for hits, d, s_ in zip(ours, theirs_docs.tolist(), theirs_scores.tolist())
    )

    # rank_bm25 on the same stems, on a subset of queries (it scores every document in Python).
    stems = {i: s for s, i in tok.stem_to_sid.items()}
    okapi = BM25Okapi([[stems[i] for i in doc] for doc in corpus_ids])
    subset = queries[: args.rank_bm25_queries]
    subset_tokens = [[stems[i] for i in q] for q in
                     tok.tokenize(subset, update_vocab=False, return_as="ids", show_progress=False)]

    def rank_bm25_search():
        out = []
        for q in subset_tokens:
            scores = okapi.get_scores(q)
            top = np.argpartition(-scores, k)[:k]
            out.append([docs[i] for i in top[np.argsort(-scores[top])]])
        return out

    result["rank_bm25 BM25Okapi"] = time_qps(rank_bm25_search, len(subset))
    if args.n_threads not in (0, 1):
        print("note: with n_threads > 1 the CPU-time column sums all threads", file=sys.stderr)
    index.close()
    return {"qps": result, "backend": backend, "same_ranking": same, "n": len(queries)}


def bench_scaled(corpus: str, queries: list[str], args, tmp: str) -> dict:
    """The corpus repeated ``args.scale`` times (ids suffixed): retrieval cost grows with the
    corpus while dynrag's per-hit cost does not, so the ratio to raw bm25s moves with size."""
    from dynrag.corpus import Passage, read_passages
    from dynrag.retrieval import BM25Index

    base = list(read_passages(corpus))
    passages = [Passage(f"{p.id}~{r}", p.title, p.text) for r in range(args.scale) for p in base]
    del base
    out = str(Path(tmp, "scaled"))
    BM25Index.build(passages, out, progress=False)
    index = BM25Index.load(out, backend="auto", n_threads=args.n_threads)
    tok, _, _, raw, raw_mm = raw_bm25s(passages, index.backend, str(Path(tmp, "raw-scaled")))
    k, n_threads = args.k, args.n_threads

    def raw_tokens():
        return tok.tokenize(queries, update_vocab=False, return_as="ids", show_progress=False)

    variants = {
        HITS: lambda: index.search_batch(queries, k),
        ROWS: lambda: index.search_rows_batch(queries, k),
        READ: lambda: read_all(index.search_batch(queries, k)),
        RAW: lambda: raw.retrieve(raw_tokens(), k=k, show_progress=False, n_threads=n_threads),
        "raw bm25s +docs mmap": lambda: raw_mm.retrieve(raw_tokens(), k=k, show_progress=False,
                                                        n_threads=n_threads),
    }
    result = best_of_interleaved(variants, len(queries), args.repeats)
    index.close()
    return {"qps": result, "passages": len(passages)}


# ---- report ----------------------------------------------------------------------------------


def report(args, ingest: dict, search: dict, scaled: dict | None, n_questions: int) -> str:
    import bm25s
    import numpy as np

    qps = search["qps"]
    full, half, raw_build = ingest["full"], ingest["half"], ingest["raw_full"]
    rate = full["passages"] / full["seconds"]
    rate_cpu = full["passages"] / full["cpu_seconds"]
    goal = GOALS["ingest"]
    ingest_verdict = ("met" if min(rate, rate_cpu) >= goal
                      else "met by CPU time only" if rate_cpu >= goal else "NOT met")
    lines = [
        "## BM25 search and ingest (bench_bm25.py)",
        "",
        f"Command: `{args.command}`",
        "",
        f"Run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, bm25s {bm25s.__version__}, "
        f"numpy {np.__version__}; bm25s backend `{search['backend']}`, n_threads={args.n_threads}"
        f" (same for every bm25s variant). Load average at start/end: {args.load_start:.2f} / "
        f"{os.getloadavg()[0]:.2f} (a shared 2-core machine: absolute numbers are noisy; ratios"
        " come from runs taken side by side).",
        f"Corpus `{args.corpus}`: {full['passages']:,} passages. Queries: {n_questions} HotpotQA "
        f"questions repeated to {search['n']:,}; k={args.k}. Best of {args.build_repeats} builds and "
        f"of {args.repeats} interleaved search runs after a warm-up (peak RSS: the largest seen).",
        "",
        "### Ingest (read JSONL + `BM25Index.build`, fresh process each)",
        "",
        "| build | passages | wall s | passages/s (wall) | passages/s (CPU time) | peak RSS growth |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, r in (("dynrag, full corpus", full), ("dynrag, first half", half),
                     ("raw bm25s in memory, full (reference)", raw_build)):
        lines.append(f"| {label} | {r['passages']:,} | {r['seconds']:.2f} | "
                     f"{r['passages'] / r['seconds']:,.0f} | "
                     f"{r['passages'] / r['cpu_seconds']:,.0f} | {r['peak_growth_mb']:.1f} MB |")
    lines += [
        "",
        f"Goal ≥ {GOALS['ingest']:,.0f} passages/s: {rate_cpu:,.0f} by CPU time, {rate:,.0f} by "
        f"wall clock: **{ingest_verdict}**. Peak RSS growth full/half: "
        f"{full['peak_growth_mb'] / max(half['peak_growth_mb'], 1e-9):.2f}× for 2× the passages "
        f"(process baseline before the build: {full['baseline_mb']:.0f} MB).",
        "",
        "### Search throughput (queries/s)",
        "",
    ]

    def table(rows: dict) -> list[str]:
        ref_w, ref_c = rows[RAW]
        out = ["| retriever | q/s (wall) | q/s (CPU time) | ÷ raw bm25s ids (wall) | ÷ raw bm25s ids (CPU) |",
               "| --- | ---: | ---: | ---: | ---: |"]
        for name, (w, c) in rows.items():
            note = " (first %d queries)" % args.rank_bm25_queries if name.startswith("rank") else ""
            out.append(f"| {name}{note} | {w:,.0f} | {c:,.0f} | {w / ref_w:.3f} | {c / ref_c:.3f} |")
        return out

    def verdict(rows: dict, name: str, reference: str, goal: float) -> str:
        (w, c), (rw, rc) = rows[name], rows[reference]
        w, c = w / rw, c / rc
        met = "met" if min(w, c) >= goal else "met by CPU time only" if c >= goal else "NOT met"
        shown = (lambda r: f"{r:,.2f}×" if r < 10 else f"{r:,.0f}×")
        return f"{shown(c)} CPU / {shown(w)} wall (goal ≥ {goal:g}×): **{met}**"

    size = f"{full['passages']:,} passages"
    lines += table(qps)
    lines += [
        "",
        f"- `search_batch` (hits) ÷ raw bm25s ids, {size}: {verdict(qps, HITS, RAW, GOALS['hits'])}.",
        f"- `search_rows_batch` (ids) ÷ raw bm25s ids, {size}: {verdict(qps, ROWS, RAW, GOALS['ids'])}.",
    ]
    if scaled is not None:
        big = f"{scaled['passages']:,} passages"
        lines += [
            f"- `search_batch` (hits) ÷ raw bm25s ids, {big}: "
            f"{verdict(scaled['qps'], HITS, RAW, GOALS['hits_scaled'])}.",
            f"- `search_rows_batch` (ids) ÷ raw bm25s ids, {big}: "
            f"{verdict(scaled['qps'], ROWS, RAW, GOALS['ids'])}.",
        ]
    lines += [
        f"- `search_batch` ÷ rank_bm25: {verdict(qps, HITS, 'rank_bm25 BM25Okapi', GOALS['rank_bm25'])}.",
        f"- Same top-{args.k} ranking as raw bm25s for {search['same_ranking']:,} of "
        f"{search['n']:,} queries.",
        "",
        "`search_batch` returns `Hit`s whose id, title and text are read from the memory-mapped "
        "`passages.jsonl` when first asked for (`stored_hits.StoredHit`): making one costs the object, its row "
        "and its score, set in bulk by loops that run in C, where cutting three strings out of "
        "each line up front cost 1.5–2 µs a hit, as much as bm25s's retrieval itself on 21k "
        "passages. A caller that reads every hit's text still pays for it (the \"every hit's text "
        "read\" row). `search_rows_batch` returns rows and scores as arrays for callers that need "
        "ids only (recall evaluation, candidate fusion).",
        "",
        "Memory: the build holds one batch (1,024 passages or 1 M characters), the vocabulary "
        "(grows sublinearly), 20 bytes a passage, and at the end the score matrix it saves "
        "(8 bytes a posting); postings wait on disk, not in memory. The half-to-full growth is "
        "the vocabulary and the matrix.",
        "",
    ]
    if scaled is not None:
        lines += [
            f"Search on the corpus repeated {args.scale}× ({scaled['passages']:,} passages, "
            "ids suffixed): retrieval cost grows with the corpus, the cost of a hit does not.",
            "",
        ]
        lines += table(scaled["qps"])
        lines.append("")
    return "\n".join(lines)


def figures(args, ingest: dict, search: dict, scaled: dict | None) -> list[tuple]:
    """The headline figures of the report, for ``--record``: the ingest rate and memory, the
    search rate, and the speed ratios the goals are set on (CPU time: the ratios the report
    judges; wall-clock ones stretch with the other jobs of a shared machine)."""
    full = ingest["full"]

    def ratio(rows: dict, name: str, reference: str) -> float:
        return rows[name][1] / rows[reference][1]

    qps = search["qps"]
    size = f"{full['passages']:,} passages, {search['n']:,} queries, k {args.k}"
    out = [
        ("ingest rate, full corpus (CPU time)", full["passages"] / full["cpu_seconds"], "passages/s",
         f"{full['passages'] / full['seconds']:,.0f} by wall clock; goal {GOALS['ingest']:,.0f}"),
        ("ingest peak RSS growth, full corpus", full["peak_growth_mb"], "MB", f"{full['passages']:,} passages"),
        ("search_batch throughput (wall)", qps[HITS][0], "queries/s", size),
        ("search_batch ÷ raw bm25s ids (CPU)", ratio(qps, HITS, RAW), "x", f"goal {GOALS['hits']:g}x"),
        ("search_rows_batch ÷ raw bm25s ids (CPU)", ratio(qps, ROWS, RAW), "x", f"goal {GOALS['ids']:g}x"),
        ("search_batch ÷ raw bm25s with documents from mmap (CPU)", ratio(qps, HITS, "raw bm25s +docs mmap"), "x",
         "like for like: both return passages read from disk"),
        ("search_batch ÷ rank_bm25 BM25Okapi (CPU)", ratio(qps, HITS, "rank_bm25 BM25Okapi"), "x",
         f"rank_bm25 on the first {args.rank_bm25_queries} queries; goal {GOALS['rank_bm25']:g}x"),
        ("same top-k ranking as raw bm25s", search["same_ranking"] / search["n"], "share",
         f"{search['same_ranking']:,} of {search['n']:,} queries"),
    ]
    if scaled is not None:
        big = f"corpus repeated {args.scale}x, {scaled['passages']:,} passages"
        out += [
            ("search_batch throughput, repeated corpus (wall)", scaled["qps"][HITS][0], "queries/s", big),
            ("search_batch ÷ raw bm25s ids, repeated corpus (CPU)", ratio(scaled["qps"], HITS, RAW), "x",
             f"{big}; goal {GOALS['hits_scaled']:g}x"),
            ("search_rows_batch ÷ raw bm25s ids, repeated corpus (CPU)", ratio(scaled["qps"], ROWS, RAW), "x",
             f"{big}; goal {GOALS['ids']:g}x"),
        ]
    return out


def write_record(args, ingest: dict, search: dict, scaled: dict | None) -> None:
    from dynrag.reproduce.systems_record import systems_id, write_systems_record

    corpus = Path(args.corpus)
    name = f"{corpus.parent.name}/{corpus.name}"
    write_systems_record(
        args.record, systems_id("bench-bm25", name), f"BM25 ingest and search speed on {name}, "
        "against raw bm25s and rank_bm25", figures(args, ingest, search, scaled), started=args.started,
        data=[args.corpus, args.questions], corpus=name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", help="JSONL corpus to index")
    parser.add_argument("--questions", required=True, help="HotpotQA JSON file whose questions are the queries")
    parser.add_argument("--min-queries", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--rank-bm25-queries", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=7, help="search runs per variant")
    parser.add_argument("--build-repeats", type=int, default=3, help="builds per corpus size")
    parser.add_argument("--scale", type=int, default=5,
                        help="also time search on the corpus repeated this many times (1: skip)")
    parser.add_argument("--n-threads", type=int, default=0, help="bm25s n_threads (0: serial)")
    parser.add_argument("--results", help="append the markdown section to this file")
    parser.add_argument("--record", metavar="DIR",
                        help="also write the headline figures as a systems result record in DIR (results/)")
    parser.add_argument("--child-build", nargs=2, metavar=("LIMIT", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--child-raw-build", metavar="LIMIT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_build:
        child_build(args.corpus, int(args.child_build[0]), args.child_build[1])
        return
    if args.child_raw_build:
        child_raw_build(args.corpus, int(args.child_raw_build))
        return
    from dynrag.reproduce.systems_record import Started

    args.started = Started.now()
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s logs its steps at DEBUG
    args.command = shlex.join([".venv/bin/python", *sys.argv])
    args.load_start = os.getloadavg()[0]

    with open(args.corpus, "rb") as f:
        total = sum(1 for line in f if line.strip())
    queries, n_questions = load_queries(args.questions, args.min_queries)
    with tempfile.TemporaryDirectory(prefix="bench-bm25-") as tmp:
        full_dir, half_dir = str(Path(tmp, "full")), str(Path(tmp, "half"))
        print(f"ingest: building {total:,} and {total // 2:,} passages in fresh processes...",
              file=sys.stderr)
        runs: dict[str, list[dict]] = {"full": [], "half": [], "raw_full": []}
        for _ in range(args.build_repeats):  # interleaved, best kept (see bench_search)
            runs["full"].append(run_child(["--child-build", str(total), full_dir, args.corpus]))
            runs["half"].append(
                run_child(["--child-build", str(total // 2), half_dir, args.corpus])
            )
            runs["raw_full"].append(run_child(["--child-raw-build", str(total), args.corpus]))
        ingest = {name: min(r, key=lambda x: x["seconds"]) for name, r in runs.items()}
        for name, r in runs.items():
            ingest[name]["cpu_seconds"] = min(x["cpu_seconds"] for x in r)
            ingest[name]["peak_growth_mb"] = max(x["peak_growth_mb"] for x in r)
        print(f"search: {len(queries):,} queries, k={args.k}...", file=sys.stderr)
        search = bench_search(full_dir, args.corpus, queries, args, tmp)
        scaled = bench_scaled(args.corpus, queries, args, tmp) if args.scale > 1 else None
    text = report(args, ingest, search, scaled, n_questions)
    print(text)
    if args.results:
        path = Path(args.results)
        existing = path.read_text(encoding="utf-8") if path.exists() else ""
        if not existing.strip():
            prefix = "# Benchmark results\n\n"
        else:
            prefix = "" if existing.endswith("\n\n") else "\n" if existing.endswith("\n") else "\n\n"
        with open(path, "a", encoding="utf-8") as f:  # append only: other sections are others'
            f.write(prefix + text)
    if args.record:
        write_record(args, ingest, search, scaled)

if __name__ == "__main__":
    main()
