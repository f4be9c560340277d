"""Load on loopback: C concurrent clients x R chat completions against `dynrag serve` at each
--batch given (default 1 and 8: one request at a time against requests batched), and the same
questions answered in-process, in one run.

Reports, per side, requests/minute, p50/p95 latency (as the clients saw it, queueing included),
counts of 2xx/429/5xx, lost and duplicated responses (each request carries an X-Request-Id the
server echoes, and its trace must name the question sent) and answers that differ from the
in-process ones; then the throughput of each batched server over the --batch 1 one, and the
serving overhead: wall time of the --batch 1 server / time to answer the same questions in this
process (one request at a time either way, so 1.0 is no overhead). Every side is warmed up first
(one answer each), then the sides take turns for --rounds rounds, the order rotating each round,
so load from others on the machine affects them alike; the ratios are of the sums.

Bounded: at most 16 clients x 20 requests x 5 rounds, and a time limit after which clients stop sending.

    .venv/bin/python benchmarks/bench_serve.py --clients 8 --requests 1 --rounds 2 [--batches 1,8] [--method single]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.servers import dynrag_serve, free_port  # noqa: E402

MAX_CLIENTS, MAX_REQUESTS, MAX_ROUNDS, MAX_SECONDS = 16, 20, 5, 1800


def local_method(method_name: str, options: dict):
    from rich.console import Console

    from dynrag.retrieval.demo_index import ensure_demo_index
    from dynrag.lm import load_lm
    from dynrag.methods.prompting import PromptBuilder
    from dynrag.methods.registry import build_method

    index = ensure_demo_index(Console(quiet=True))
    return build_method(method_name, load_lm("bundled", progress=False), index, options,
                        PromptBuilder.for_dataset("default"))


def in_process(method, questions: list[str]) -> tuple[float, list[str]]:
    started = time.perf_counter()
    answers = [method.answer(q).text for q in questions]
    return time.perf_counter() - started, answers


def served(url: str, plan: list[list[tuple[str, str]]], method: str, options: dict, deadline: float):
    """Each client sends its requests one after another; returns per-request results and wall time."""
    results: list[dict] = []
    lock = threading.Lock()

    def client(requests: list[tuple[str, str]]) -> None:
        with httpx.Client(timeout=MAX_SECONDS) as http:
            for request_id, question in requests:
                if time.monotonic() > deadline:
                    with lock:
                        results.append({"id": request_id, "status": "not sent (time limit)"})
                    continue
                body = {"model": method, "messages": [{"role": "user", "content": question}], "options": options}
                t0 = time.perf_counter()
                try:
                    r = http.post(f"{url}/v1/chat/completions", json=body, headers={"X-Request-Id": request_id})
                    out = {"id": request_id, "status": r.status_code, "seconds": time.perf_counter() - t0,
                           "echo": r.headers.get("x-request-id"), "question": question}
                    if r.status_code == 200:
                        data = r.json()
                        out["answer"] = data["choices"][0]["message"]["content"]
                        out["trace_question"] = data["dynrag"]["question"]
                except httpx.HTTPError as exc:
                    out = {"id": request_id, "status": f"error {type(exc).__name__}"}
                with lock:
                    results.append(out)

    threads = [threading.Thread(target=client, args=(requests,)) for requests in plan]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, time.perf_counter() - started


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))] if values else float("nan")


def summary(name: str, results: list[dict], sent_ids: list[str], seconds: float, local: dict[str, str]) -> dict:
    statuses = Counter(str(r["status"]) for r in results)
    ok = [r for r in results if r["status"] == 200]
    answered_ids = Counter(r["echo"] for r in ok)
    # Lost: sent and never answered (a transport error), or not accounted for at all.
    lost = [r["id"] for r in results if str(r["status"]).startswith("error")]
    lost += [rid for rid in sent_ids if rid not in {r["id"] for r in results}]
    duplicated = sum(n - 1 for n in answered_ids.values() if n > 1)
    mismatched = [r["id"] for r in ok if r["echo"] != r["id"] or r["trace_question"] != r["question"]]
    differ = sum(1 for r in ok if r["answer"] != local[r["question"]])
    latencies = [r["seconds"] for r in ok]
    n2xx = sum(n for s, n in statuses.items() if s.startswith("2"))
    n5xx = sum(n for s, n in statuses.items() if s.startswith("5"))
    other = {s: n for s, n in statuses.items() if s[:1] not in "245"}
    errors = len(results) - n2xx
    print(f"  {name:<10} {len(results)} requests in {seconds:.1f} s = {60 * len(ok) / seconds:.1f} answers/min; "
          f"latency p50 {percentile(latencies, 0.5):.1f} s, p95 {percentile(latencies, 0.95):.1f} s")
    print(f"  {'':<10} 2xx {n2xx}, 429 {statuses.get('429', 0)}, 5xx {n5xx}, other {other}; errors {errors}, "
          f"lost {len(lost)}, duplicated {duplicated}, mismatched id/question {len(mismatched)}, "
          f"answers differing from in-process {differ} of {len(ok)}")
    return {"answered": len(ok), "seconds": seconds}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=2, help="per client")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batches", default="1,8", help="the --batch of each server compared (comma-separated)")
    ap.add_argument("--method", default="single")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--queue-size", type=int, default=None, help="server queue (default: clients, so none is refused)")
    ap.add_argument("--time-limit", type=float, default=900.0, help="seconds after which clients stop sending")
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    if not (1 <= args.clients <= MAX_CLIENTS and 1 <= args.requests <= MAX_REQUESTS
            and 1 <= args.rounds <= MAX_ROUNDS and args.time_limit <= MAX_SECONDS and 1 <= len(batches) <= 3
            and all(1 <= b <= MAX_CLIENTS for b in batches)):
        ap.error(f"bounded: --clients 1..{MAX_CLIENTS}, --requests 1..{MAX_REQUESTS}, --rounds 1..{MAX_ROUNDS}, "
                 f"--time-limit <= {MAX_SECONDS}, one to three --batches of 1..{MAX_CLIENTS}")

    from dynrag.demo import ordered_demo_questions

    pool = [q.question for q in ordered_demo_questions()]
    plan = [[(f"c{c}-r{r}", pool[(c * args.requests + r) % len(pool)]) for r in range(args.requests)]
            for c in range(args.clients)]
    questions = [q for requests in plan for _, q in requests]
    options = {"max_new_tokens": args.max_new_tokens}
    queue = args.clients if args.queue_size is None else args.queue_size

    method = local_method(args.method, options)
    in_process(method, questions[:1])  # warm-up: the cached exemplar prefix, first-call costs
    sides = ["in-process"] + [f"batch {b}" for b in batches]
    seconds = dict.fromkeys(sides, 0.0)
    results: dict[str, list[dict]] = {side: [] for side in sides}
    sent: dict[str, list[str]] = {side: [] for side in sides}
    local_answers: list[str] = []
    deadline = time.monotonic() + args.time_limit
    with ExitStack() as servers:
        urls = {}
        for b in batches:  # every server up (and idle) before any side is timed
            port = free_port()
            servers.enter_context(dynrag_serve(port, Path("/tmp") / f"bench-serve-{port}.log", "--batch", str(b),
                                               "--queue-size", str(queue), "--timeout", str(MAX_SECONDS)))
            urls[f"batch {b}"] = f"http://127.0.0.1:{port}"
        for url in urls.values():
            served(url, [[("warm-up", questions[0])]], args.method, options, deadline)
        for round_no in range(args.rounds):
            order = sides[round_no % len(sides):] + sides[: round_no % len(sides)]
            for side in order:
                if side == "in-process":
                    took, local_answers = in_process(method, questions)
                else:
                    tagged = [[(f"{rid}-{round_no}", q) for rid, q in requests] for requests in plan]
                    sent[side] += [rid for requests in tagged for rid, _ in requests]
                    side_results, took = served(urls[side], tagged, args.method, options, deadline)
                    results[side] += side_results
                seconds[side] += took
            print(f"  round {round_no + 1} ({', '.join(order)}): "
                  + ", ".join(f"{side} {seconds[side]:.1f} s" for side in sides) + " (cumulative)", flush=True)

    print(f"{args.clients} clients x {args.requests} requests x {args.rounds} rounds, method {args.method}, "
          f"max_new_tokens {args.max_new_tokens}, server queue {queue}")
    local = dict(zip(questions, local_answers))
    n_local = len(questions) * args.rounds
    print(f"  in-process {n_local} answers in {seconds['in-process']:.1f} s = "
          f"{60 * n_local / seconds['in-process']:.1f} answers/min (one at a time)")
    rates = {}
    for b in batches:
        side = f"batch {b}"
        done = summary(side, results[side], sent[side], seconds[side], local)
        rates[b] = done["answered"] / done["seconds"]
    if 1 in rates:
        for b in batches:
            if b != 1:
                print(f"  throughput: batch {b} / batch 1 = {rates[b] / rates[1]:.2f}x")
        print(f"  overhead:   batch 1 served / in-process = {seconds['batch 1'] / seconds['in-process']:.3f}x")


if __name__ == "__main__":
    main()
