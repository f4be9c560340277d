"""Scale curves: how far one machine goes with the embedded engines, and where to switch.

    .venv/bin/python benchmarks/scale_corpus.py SCRATCH/psgs5m.jsonl --passages 5000000
    nice -n 10 .venv/bin/python benchmarks/bench_scale.py --corpus SCRATCH/psgs5m.jsonl --scratch SCRATCH \\
        --questions HOTPOT_DEV.json \\
        [--sizes 100000,1000000,5000000] [--parts bm25,dense,opensearch] > scale.md

The corpus is shaped like DPR's psgs_w100 (scale_corpus.py: 100-word passages of resampled real
sentences); the first N passages of the 5M file are the N-passage corpus. Every measurement runs
in a fresh child process, so its peak RSS (ru_maxrss) is its own:

- bm25 (bm25s, ``BM25Index.build`` as ``dynrag index`` runs it): ingest rate, peak RSS of the
  build, size on disk (passage store and score matrix), then q/s at k = 3 and 10 over HotpotQA
  questions with the numpy and numba backends, and the search process's peak RSS.
- dense: the encode rate of the packaged MiniLM on a sample of passages (encoding 1M on two cores
  would take hours), and exact search over stored float32 unit vectors of 384 dimensions at each
  size (numpy blocked top-k over the memory-mapped file, and faiss IndexFlatIP when installed) with
  query vectors from the same encoder: flat search costs the same whatever the vectors hold.
- opensearch: osmem-server (an in-memory OpenSearch-compatible server, so its memory is not a real
  cluster's) on loopback: bulk ingest rate through ``dynrag index --engine opensearch``'s code,
  q/s at k = 3 and 10 through _msearch in batches of 16, and the server's peak RSS (VmHWM).

Growth is fitted as y = a * N^e on the measured sizes (e < 1: sublinear) and extrapolated to 21M.
`--record DIR` (with a run or with --merge) also writes the per-size figures, the exponents and the
21M extrapolations as a systems result record in DIR (docs/results-records.md).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

TARGET = 21_015_324  # passages in DPR's psgs_w100.tsv
DIM = 384

# The bm25 quantities fitted over the sizes: label, row key, unit at 21M, scale to that unit.
FITTED = (
    ("build peak RSS", "peak_rss_mb", "GB", 1 / 1024),
    ("build wall time", "seconds", "h", 1 / 3600),
    ("index on disk", "disk_bytes", "GiB", 1 / 2**30),
    ("search peak RSS", "search_peak_rss_mb", "GB", 1 / 1024),
    ("q/s k=10 numba", "search_qps_numba_k10", "q/s", 1),
    ("q/s k=10 numpy", "search_qps_numpy_k10", "q/s", 1),
)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_s() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def questions(path: str, n: int) -> list[str]:
    """The first ``n`` questions of a HotpotQA JSON file, repeated as often as needed."""
    qs = [q["question"] for q in json.loads(Path(path).read_text())]
    return list(itertools.islice(itertools.cycle(qs), n))


def dir_bytes(path: Path, names: tuple[str, ...] | None = None) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and (names is None or p.name in names))


def qps(search, queries: list[str], k: int, batch: int = 16, repeats: int = 2) -> float:
    best = math.inf
    for _ in range(repeats):  # best of: other load on a shared machine only adds time
        t0 = time.perf_counter()
        for i in range(0, len(queries), batch):
            search(queries[i : i + batch], k)
        best = min(best, time.perf_counter() - t0)
    return len(queries) / best


# ---- children ---------------------------------------------------------------------------------


def child_bm25_build(corpus: str, size: int, out: str) -> dict:
    from dynrag.corpus import read_passages
    from dynrag.retrieval.bm25 import BM25Index

    base = peak_rss_mb()
    t0, c0 = time.perf_counter(), cpu_s()
    manifest = BM25Index.build(itertools.islice(read_passages(corpus), size), out, progress=False)
    return {"passages": manifest["passage_count"], "seconds": time.perf_counter() - t0, "cpu": cpu_s() - c0,
            "peak_rss_mb": peak_rss_mb(), "baseline_mb": base}


def child_bm25_search(out: str, questions_path: str, n_queries: int) -> dict:
    from dynrag.retrieval.bm25 import BM25Index

    queries = questions(questions_path, n_queries)
    result = {}
    for backend in ("numpy", "numba"):
        t0 = time.perf_counter()
        index = BM25Index.load(out, backend=backend)
        result[f"load_s_{backend}"] = time.perf_counter() - t0
        index.search_batch(queries[:16], 10)  # warm-up (numba compiles)
        for k in (3, 10):
            result[f"qps_{backend}_k{k}"] = qps(index.search_batch, queries, k)
        index.close()
    result["peak_rss_mb"] = peak_rss_mb()
    return result


def child_dense_encode(corpus: str, sample: int) -> dict:
    import torch

    from dynrag.corpus import read_passages
    from dynrag.retrieval.embedder import Embedder

    embedder = Embedder.load()
    texts = [f"{p.title}\n{p.text}" for p in itertools.islice(read_passages(corpus), sample)]
    embedder.encode(texts[:64], batch_size=64)  # warm-up
    t0, c0 = time.perf_counter(), cpu_s()
    embedder.encode(texts, batch_size=64)
    seconds = time.perf_counter() - t0
    return {"passages": len(texts), "seconds": seconds, "cpu": cpu_s() - c0, "rate": len(texts) / seconds,
            "threads": torch.get_num_threads()}


def child_dense_search(vectors_path: str, questions_path: str, n_queries: int) -> dict:
    from dynrag.retrieval.embedder import Embedder
    from dynrag.retrieval.vectors import exact_top_k, faiss_available, faiss_index

    vectors = np.load(vectors_path, mmap_mode="r")
    query_vectors = Embedder.load().encode(questions(questions_path, n_queries), batch_size=16)

    def rate(search) -> float:  # batches of 16 query vectors, k = 10
        t0 = time.perf_counter()
        for i in range(0, len(query_vectors), 16):
            search(query_vectors[i : i + 16], 10)
        return len(query_vectors) / (time.perf_counter() - t0)

    result: dict = {"count": len(vectors), "qps_exact_numpy_k10": rate(lambda q, k: exact_top_k(vectors, q, k))}
    result["rss_after_numpy_mb"] = peak_rss_mb()
    if faiss_available():
        t0 = time.perf_counter()
        index = faiss_index(vectors)
        result["faiss_build_s"] = time.perf_counter() - t0
        result["qps_faiss_flat_k10"] = rate(index.search)
    result["peak_rss_mb"] = peak_rss_mb()
    return result


def child_os_ingest(corpus: str, size: int, url: str) -> dict:
    from dynrag.corpus import read_passages
    from dynrag.retrieval.opensearch_ingest import build_opensearch_index

    t0, c0 = time.perf_counter(), cpu_s()
    meta = build_opensearch_index(itertools.islice(read_passages(corpus), size), url, f"scale{size}",
                                  replace=True, progress=False)
    return {"passages": meta["passage_count"], "seconds": time.perf_counter() - t0, "client_cpu": cpu_s() - c0,
            "client_peak_rss_mb": peak_rss_mb()}


def child_os_search(url: str, size: int, questions_path: str, n_queries: int, bm25_dir: str | None) -> dict:
    from dynrag.retrieval.opensearch import OpenSearchRetriever

    queries = questions(questions_path, n_queries)
    index = OpenSearchRetriever.open(url, f"scale{size}")
    index.search_batch(queries[:16], 10)
    result = {f"qps_k{k}": qps(index.search_batch, queries, k) for k in (3, 10)}
    if bm25_dir and Path(bm25_dir).is_dir():
        from dynrag.retrieval.bm25 import BM25Index

        distinct = list(dict.fromkeys(queries))
        with BM25Index.load(bm25_dir, backend="numpy") as bm25:
            ours, theirs = bm25.search_batch(distinct, 10), index.search_batch(distinct, 10)
        result["top10_overlap_with_bm25s"] = sum(
            len({h.id for h in a} & {h.id for h in b}) / 10 for a, b in zip(ours, theirs)) / len(distinct)
    index.close()
    return result


CHILDREN = {"bm25-build": child_bm25_build, "bm25-search": child_bm25_search, "dense-encode": child_dense_encode,
            "dense-search": child_dense_search, "os-ingest": child_os_ingest, "os-search": child_os_search}


def run_child(name: str, *args) -> dict:
    cmd = [sys.executable, __file__, "--child", name, json.dumps(list(args))]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"child {name} {args} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---- the parent -------------------------------------------------------------------------------


def marginal(sizes: list[int], values: list[float], rate: bool = False) -> float:
    """Value at TARGET continuing the cost per passage between the two largest sizes (y = c + b*N
    through them; for a rate, on its inverse, the time per query). A power law fitted over sizes
    where a fixed baseline dominates the small ones (the interpreter, the model) understates growth
    that is linear at scale; this line does not."""
    if len(sizes) < 2:
        return math.nan
    (n0, n1), (y0, y1) = sizes[-2:], values[-2:]
    if rate:
        y0, y1 = 1 / y0, 1 / y1
    at = y1 + (y1 - y0) / (n1 - n0) * (TARGET - n1)
    return 1 / at if rate else at


def fit(sizes: list[int], values: list[float]) -> tuple[float, float]:
    """(exponent e, value extrapolated to TARGET) of y = a * N^e fitted in log-log space."""
    x, y = np.log(sizes), np.log(values)
    e, log_a = np.polyfit(x, y, 1) if len(sizes) > 1 else (1.0, y[0] - x[0])
    return float(e), float(math.exp(log_a) * TARGET ** e)


def write_unit_vectors(path: Path, n: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    array = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, DIM))
    for start in range(0, n, 100_000):
        block = rng.standard_normal((min(100_000, n - start), DIM), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        array[start : start + len(block)] = block
    array.flush()
    del array


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def bench_bm25(args, sizes) -> list[dict]:
    rows = []
    for size in sizes:
        out = Path(args.scratch) / f"bm25-{size}"
        log(f"bm25: building {size:,} ... (load {os.getloadavg()[0]:.1f})")
        build = run_child("bm25-build", args.corpus, size, str(out))
        store = dir_bytes(out, ("passages.jsonl", "offsets.npy", "fields.npy"))
        total = dir_bytes(out)
        log(f"bm25: {size:,} built in {build['seconds']:.0f} s, peak RSS {build['peak_rss_mb']:.0f} MB; searching ...")
        search = run_child("bm25-search", str(out), args.questions, args.queries)
        rows.append({"size": size, **build, "store_bytes": store, "matrix_bytes": total - store, "disk_bytes": total,
                     **{f"search_{k}": v for k, v in search.items()}})
        log(json.dumps(rows[-1]))
        if size != sizes[0]:
            shutil.rmtree(out, ignore_errors=True)  # the smallest stays, for the OpenSearch overlap
    return rows


def bench_dense(args, sizes) -> dict:
    log("dense: encode rate ...")
    encode = run_child("dense-encode", args.corpus, args.encode_sample)
    searches = []
    for size in sizes:
        path = Path(args.scratch) / f"vectors-{size}.npy"
        write_unit_vectors(path, size)
        log(f"dense: searching {size:,} vectors ...")
        searches.append({"size": size, "bytes": path.stat().st_size, **run_child("dense-search", str(path), args.questions, args.queries)})
        log(json.dumps(searches[-1]))
        path.unlink()
    return {"encode": encode, "search": searches}


def bench_opensearch(args, size: int) -> dict:
    from osmem_server import OsmemServer

    with OsmemServer.start(japanese=False, addr="127.0.0.1:0") as server:
        log(f"opensearch: ingesting {size:,} into osmem-server ...")
        ingest = run_child("os-ingest", args.corpus, size, server.url)
        hwm = rss = None
        for line in Path(f"/proc/{server.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 1024
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
        search = run_child("os-search", server.url, size, args.questions, args.queries, str(Path(args.scratch) / f"bm25-{size}"))
    return {"size": size, **ingest, "server_peak_rss_mb": hwm, "server_rss_mb": rss, **search}


def report(args, bm25_rows, dense, os_row, load_start, load: str | None = None) -> str:
    load = load or f"Load average at start {load_start}, at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    out = [f"Corpus: the first N passages of `{args.corpus}` (scale_corpus.py). Queries: {args.queries} HotpotQA "
           f"questions. {load}; "
           f"{os.cpu_count()} CPUs, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB RAM.", ""]
    if bm25_rows:
        out += ["### bm25s (`BM25Index.build`, then search)", "",
                "| passages | ingest passages/s (wall) | ingest passages/s (CPU) | build peak RSS | on disk (store + matrix) "
                "| q/s k=3 numpy | q/s k=10 numpy | q/s k=3 numba | q/s k=10 numba | search peak RSS |",
                "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in bm25_rows:
            out.append(
                f"| {r['size']:,} | {r['passages'] / r['seconds']:,.0f} | {r['passages'] / r['cpu']:,.0f} | "
                f"{r['peak_rss_mb']:,.0f} MB | {r['disk_bytes'] / 2**30:.2f} GiB ({r['store_bytes'] / 2**30:.2f} + "
                f"{r['matrix_bytes'] / 2**30:.2f}) | {r['search_qps_numpy_k3']:,.1f} | {r['search_qps_numpy_k10']:,.1f} | "
                f"{r['search_qps_numba_k3']:,.1f} | {r['search_qps_numba_k10']:,.1f} | {r['search_peak_rss_mb']:,.0f} MB |")
        sizes = [r["size"] for r in bm25_rows]
        out += ["", f"Fitted y = a·N^e over {', '.join(f'{s:,}' for s in sizes)} passages, and the cost per passage "
                f"between the two largest continued (y = c + b·N; for q/s, on seconds per query), to {TARGET:,}:", ""]
        out += ["| quantity | exponent e | at 21M (power law) | at 21M (c + b·N) |", "| --- | ---: | ---: | ---: |"]
        for label, key, unit, scale in FITTED:
            values = [r[key] for r in bm25_rows]
            e, at = fit(sizes, values)
            line = marginal(sizes, values, rate=unit == "q/s")
            out.append(f"| {label} | {e:.2f} | {at * scale:,.1f} {unit} | {line * scale:,.1f} {unit} |")
    if dense:
        enc = dense["encode"]
        out += ["", "### dense (packaged all-MiniLM-L6-v2, 384-d float32)", "",
                f"Encode rate: {enc['rate']:.1f} passages/s ({enc['passages']:,} passages in {enc['seconds']:.0f} s, "
                f"torch {enc['threads']} threads): 1M passages would take {1e6 / enc['rate'] / 3600:.1f} h, "
                f"21M {TARGET / enc['rate'] / 3600 / 24:.1f} days.", "",
                "| vectors | file | exact numpy q/s k=10 (mmap) | faiss IndexFlatIP q/s k=10 | faiss build s | peak RSS |",
                "| ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in dense["search"]:
            faiss_qps = f"{r['qps_faiss_flat_k10']:,.1f}" if "qps_faiss_flat_k10" in r else "not installed"
            faiss_s = f"{r['faiss_build_s']:.1f}" if "faiss_build_s" in r else "–"
            out.append(f"| {r['size']:,} | {r['bytes'] / 2**30:.2f} GiB | {r['qps_exact_numpy_k10']:,.1f} | "
                       f"{faiss_qps} | {faiss_s} | {r['peak_rss_mb']:,.0f} MB |")
        out.append(f"\nAt 21M the vectors alone are {TARGET * DIM * 4 / 2**30:.1f} GiB.")
    if os_row:
        r = os_row
        out += ["", "### OpenSearch (osmem-server, in memory, on loopback)", "",
                "| passages | ingest passages/s | server peak RSS | q/s k=3 | q/s k=10 | top-10 overlap with bm25s |",
                "| ---: | ---: | ---: | ---: | ---: | ---: |",
                f"| {r['size']:,} | {r['passages'] / r['seconds']:,.0f} | {r['server_peak_rss_mb']:,.0f} MB | "
                f"{r['qps_k3']:,.1f} | {r['qps_k10']:,.1f} | {r.get('top10_overlap_with_bm25s', float('nan')):.2f} |"]
    return "\n".join(out) + "\n"


def figures(bm25_rows, dense, os_row) -> list[tuple]:
    """What the report prints, as a record's figures: per size the ingest rate, build memory, disk
    and search rates; over the sizes each fitted exponent and its 21M value both ways; the dense
    encode and search rates; the OpenSearch row. Names carry the size, so they stay the same from
    one run to the next at the same sizes."""
    out = []
    for r in bm25_rows:
        at = f"{r['size']:,} passages"
        out += [(f"bm25 ingest rate at {at} (CPU)", r["passages"] / r["cpu"], "passages/s",
                 f"{r['passages'] / r['seconds']:,.0f} by wall clock"),
                (f"bm25 build peak RSS at {at}", r["peak_rss_mb"], "MB", None),
                (f"bm25 index on disk at {at}", r["disk_bytes"] / 2**30, "GiB", None),
                (f"bm25 search at {at}, k 10, numba", r["search_qps_numba_k10"], "queries/s", None),
                (f"bm25 search at {at}, k 10, numpy", r["search_qps_numpy_k10"], "queries/s", None)]
    sizes = [r["size"] for r in bm25_rows]
    if len(sizes) > 1:  # one size fits no curve
        over = f"over {', '.join(f'{s:,}' for s in sizes)} passages"
        for label, key, unit, scale in FITTED:
            values = [r[key] for r in bm25_rows]
            e, at = fit(sizes, values)
            line = marginal(sizes, values, rate=unit == "q/s")
            out += [(f"bm25 {label} growth exponent", e, "exponent", over),
                    (f"bm25 {label} at 21M, power law", at * scale, unit, f"an extrapolation {over}, not a run"),
                    (f"bm25 {label} at 21M, cost per passage continued", line * scale, unit,
                     "the two largest sizes' cost per passage continued; an extrapolation, not a run")]
    if dense:
        enc = dense["encode"]
        out.append(("dense encode rate, packaged all-MiniLM-L6-v2", enc["rate"], "passages/s",
                    f"{enc['passages']:,} passages, torch {enc['threads']} threads"))
        for r in dense["search"]:
            at = f"{r['size']:,} vectors"
            out.append((f"dense exact numpy search at {at}, k 10", r["qps_exact_numpy_k10"], "queries/s", None))
            if "qps_faiss_flat_k10" in r:
                out.append((f"dense faiss IndexFlatIP search at {at}, k 10", r["qps_faiss_flat_k10"], "queries/s",
                            None))
    if os_row:
        at = f"{os_row['size']:,} passages"
        out += [(f"opensearch ingest rate at {at}", os_row["passages"] / os_row["seconds"], "passages/s",
                 "osmem-server on loopback"),
                (f"opensearch server peak RSS at {at}", os_row["server_peak_rss_mb"] or math.nan, "MB", None),
                (f"opensearch search at {at}, k 10", os_row["qps_k10"], "queries/s", None),
                (f"opensearch top-10 overlap with bm25s at {at}", os_row.get("top10_overlap_with_bm25s", math.nan),
                 "share", None)]
    return out


def write_record(args, bm25_rows, dense, os_row, started) -> None:
    from dynrag.reproduce.systems_record import systems_id, write_systems_record

    sizes = "+".join(f"{r['size']}" for r in bm25_rows) or "no-bm25"
    parts = "merged" if args.merge else args.parts.replace(",", "+")
    write_systems_record(
        args.record, systems_id("bench-scale", parts, sizes),
        f"Scale curves on resampled 100-word passages ({parts}; bm25 sizes {sizes.replace('+', ', ')})",
        figures(bm25_rows, dense, os_row), started=started,
        data=[args.questions] if args.questions else [], corpus=Path(args.corpus).name if args.corpus else None)


def merged(files: list[str]) -> tuple[list[dict], dict | None, dict | None]:
    rows: dict[int, dict] = {}
    dense = os_row = None
    for name in files:
        raw = json.loads(Path(name).read_text())
        rows.update({r["size"]: r for r in raw.get("bm25") or []})
        dense = raw.get("dense") or dense
        os_row = raw.get("opensearch") or os_row
    return [rows[size] for size in sorted(rows)], dense, os_row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", help="the JSONL corpus to take the first N passages of (scale_corpus.py makes one)")
    ap.add_argument("--questions", help="HotpotQA JSON file whose questions are the queries")
    ap.add_argument("--scratch", default="/tmp/dynrag-scale")
    ap.add_argument("--sizes", default="100000,1000000,5000000")
    ap.add_argument("--dense-sizes", default="100000,1000000")
    ap.add_argument("--opensearch-size", type=int, default=100_000)
    ap.add_argument("--parts", default="bm25,dense,opensearch")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--encode-sample", type=int, default=2000)
    ap.add_argument("--merge", nargs="+", metavar="JSON",
                    help="report earlier runs' bench_scale.json files together (a later file's row for a size "
                         "replaces an earlier one's), fitting over every size: for a sweep split into steps")
    ap.add_argument("--record", metavar="DIR", help="also write the figures as a systems result record in DIR")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("child_args", nargs="?", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(CHILDREN[args.child](*json.loads(args.child_args))))
        return
    from dynrag.reproduce.systems_record import Started

    started = Started.now()
    if args.merge:
        bm25_rows, dense, os_row = merged(args.merge)
        print(report(args, bm25_rows, dense, os_row, "",
                     f"Merged from {', '.join(args.merge)} (their loads: see each step)"))
        if args.record:
            write_record(args, bm25_rows, dense, os_row, started)
        return
    if not args.corpus or not args.questions:
        ap.error("--corpus and --questions are required (unless --merge)")
    Path(args.scratch).mkdir(parents=True, exist_ok=True)
    load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    parts = set(args.parts.split(","))
    sizes = [int(s) for s in args.sizes.split(",")]
    bm25_rows = bench_bm25(args, sizes) if "bm25" in parts else []
    os_row = bench_opensearch(args, args.opensearch_size) if "opensearch" in parts else None
    dense = bench_dense(args, [int(s) for s in args.dense_sizes.split(",")]) if "dense" in parts else None
    text = report(args, bm25_rows, dense, os_row, load_start)
    raw = {"bm25": bm25_rows, "dense": dense, "opensearch": os_row}
    (Path(args.scratch) / "bench_scale.json").write_text(json.dumps(raw, indent=1))
    print(text)
    if args.record:
        write_record(args, bm25_rows, dense, os_row, started)


if __name__ == "__main__":
    main()
