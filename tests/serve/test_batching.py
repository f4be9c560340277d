"""`dynrag serve --batch N` started for real on loopback: concurrent requests join the running
batch and get what they get one at a time, nothing is lost or answered twice, a request past its
timeout is cancelled while the others in its batch finish, and N running + queue_size waiting is
the capacity beyond which the answer is 429.

The fast test serves the tiny random Llama (it loads in well under a second and generates
garbage, which is as good as words for comparing answers) from the test process; the slow ones
start `dynrag serve` on the bundled model, whose long requests can be made to outlast a timeout."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from dynrag.demo import ordered_demo_questions
from tests.serve.conftest import Served
from tests.servers import artifacts_dir, dynrag_serve, free_port, serving_in_process
from tests.tiny_models import save_tiny_llama

SHORT = {"method": "single", "options": {"max_new_tokens": 16}}
QUICK = {"method": "direct", "options": {"max_new_tokens": 8}}  # a second or two on the bundled model
# A request that keeps the bundled model busy for half a minute or more: a retrieval and a new
# prompt after every token, until a long budget runs out (measured warm and alone: n=2 and 50
# steps took 16 s on two cores).
LONG = {"method": "fixed_length", "options": {"n": 1, "max_retrievals": 100, "max_steps": 100,
                                              "max_new_tokens": 400}}


def questions(n: int) -> list[str]:
    pool = [q.question for q in ordered_demo_questions()]
    return [pool[i % len(pool)] for i in range(n)]


def ask(served: Served, question: str, body: dict, request_id: str | None = None) -> httpx.Response:
    headers = {"X-Request-Id": request_id} if request_id else {}
    return httpx.post(f"{served.v1}/ask", json={"question": question, **body}, headers=headers, timeout=300)


def queue_of(served: Served) -> dict:
    return httpx.get(f"{served.root}/health", timeout=10).json()["queue"]


def wait_until(predicate, served: Served, seconds: float = 120.0) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = queue_of(served)
        if predicate(status):
            return status
        time.sleep(0.05)
    raise AssertionError(f"the server's queue never reached the state asked for: {queue_of(served)}")


def concurrently(served: Served, sends: list[tuple[str, str, dict]]) -> dict[str, httpx.Response]:
    """Each (request id, question, body) from its own client thread, all at once."""
    results: dict[str, httpx.Response] = {}
    lock = threading.Lock()

    def send(request_id, question, body):
        response = ask(served, question, body, request_id)
        with lock:
            assert request_id not in results
            results[request_id] = response

    threads = [threading.Thread(target=send, args=s) for s in sends]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return results


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    model = save_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))
    port = free_port()
    # In this process (the command's own app, on uvicorn in a thread): the slow tests below start
    # `dynrag serve --batch` as a process.
    with serving_in_process(port, {"batch": 4, "queue_size": 4}, {"model": f"hf:{model}"}):
        yield Served(port, None)


def test_concurrent_requests_get_what_they_get_one_at_a_time(tiny):
    status = queue_of(tiny)
    assert status["batch"] == 4 and status["capacity"] == 8 and status["running"] == 0
    asked = questions(8)
    alone = {q: ask(tiny, q, SHORT).json()["answer"] for q in dict.fromkeys(asked)}
    for round_no in range(2):  # twice: the second round meets caches the first left
        sends = [(f"r{round_no}-c{i}", q, SHORT) for i, q in enumerate(asked)]
        results = concurrently(tiny, sends)
        assert sorted(results) == sorted(rid for rid, _, _ in sends)  # nothing lost, nothing twice
        for rid, question, _ in sends:
            response = results[rid]
            assert response.status_code == 200, response.text
            assert response.headers["x-request-id"] == rid
            trace = response.json()
            assert trace["question"] == question and trace["answer"] == alone[question]
    after = wait_until(lambda q: q["running"] == 0 and q["waiting"] == 0, tiny)
    assert after["completed"] - status["completed"] == len(alone) + 16
    assert after["failed"] == after["cancelled"] == after["rejected"] == 0


@pytest.fixture(scope="module")
def bundled():
    port = free_port()
    with dynrag_serve(port, artifacts_dir() / "serve-batch-bundled.log", "--batch", "3", "--queue-size", "1",
                      "--timeout", "12"):
        yield Served(port, None)


@pytest.mark.slow
def test_a_timed_out_request_is_cancelled_while_the_rest_of_its_batch_finishes(bundled):
    short = questions(3)[1:]
    alone = {q: ask(bundled, q, QUICK).json()["answer"] for q in short}
    before = queue_of(bundled)
    sends = [("long", questions(1)[0], LONG)] + [(f"short-{i}", q, QUICK) for i, q in enumerate(short)]
    results = concurrently(bundled, sends)
    assert results["long"].status_code == 504 and results["long"].json()["error"]["code"] == "timeout"
    for i, question in enumerate(short):
        response = results[f"short-{i}"]
        assert response.status_code == 200, response.text
        assert response.json()["answer"] == alone[question]
    after = wait_until(lambda q: q["running"] == 0 and q["cancelled"] > before["cancelled"], bundled)
    assert after["timed_out"] - before["timed_out"] == 1 and after["cancelled"] - before["cancelled"] == 1
    assert after["completed"] - before["completed"] == 2 and after["failed"] == 0


@pytest.mark.slow
def test_429_once_n_running_and_the_queue_are_full(bundled):
    before = queue_of(bundled)
    results: dict[str, httpx.Response] = {}
    threads = []
    for i in range(4):  # three run (the batch), one waits (the queue)
        t = threading.Thread(target=lambda i=i: results.__setitem__(i, ask(bundled, questions(4)[i], LONG)))
        t.start()
        threads.append(t)
        wait_until(lambda q, n=i + 1: q["running"] + q["waiting"] == n, bundled)
    status = queue_of(bundled)
    assert status["running"] == 3 and status["waiting"] == 1
    rejected = ask(bundled, questions(1)[0], QUICK)
    assert rejected.status_code == 429 and rejected.json()["error"]["code"] == "queue_full"
    assert int(rejected.headers["retry-after"]) >= 1
    for t in threads:
        t.join(300)
    assert all(r.status_code == 504 for r in results.values()), {i: r.text for i, r in results.items()}
    after = wait_until(lambda q: q["running"] == 0 and q["waiting"] == 0, bundled)
    assert after["rejected"] - before["rejected"] == 1 and after["timed_out"] - before["timed_out"] == 4
