"""`dynrag serve --batch N` served for real on loopback: concurrent requests join the running
batch and get what they get one at a time, nothing is lost or answered twice, a request past its
timeout is cancelled while the others in its batch finish, and N running + queue_size waiting is
the capacity beyond which the answer is 429.

Both servers serve the tiny random Llama (it loads in well under a second and generates garbage,
which is as good as words for comparing answers) from the test process. For the timeout tests the
long request is held, not slow: its search waits at a gate the test closes (GatedRetriever), so
it outlasts the timeout by construction on any machine, while the short requests (closed book, a
few tokens of the tiny model: milliseconds) finish far inside it."""

from __future__ import annotations

import threading

import httpx
import pytest

from dynrag.demo import ordered_demo_questions
from tests.fakes import GatedRetriever
from tests.serve.conftest import Served
from tests.servers import free_port, serving_in_process
from tests.tiny_models import save_tiny_llama
from tests.waiting import HANG_GUARD_S, wait_for

SHORT = {"method": "single", "options": {"max_new_tokens": 16}}
QUICK = {"method": "direct", "options": {"max_new_tokens": 8}}  # no search: never meets the gate
HELD = {"method": "single", "options": {"max_new_tokens": 8}}  # searches first: held while the gate is closed
TIMEOUT_S = 3  # past it the held request is answered 504; a QUICK one takes milliseconds


def questions(n: int) -> list[str]:
    pool = [q.question for q in ordered_demo_questions()]
    return [pool[i % len(pool)] for i in range(n)]


def ask(served: Served, question: str, body: dict, request_id: str | None = None) -> httpx.Response:
    headers = {"X-Request-Id": request_id} if request_id else {}
    return httpx.post(f"{served.v1}/ask", json={"question": question, **body}, headers=headers, timeout=HANG_GUARD_S)


def queue_of(served: Served) -> dict:
    return httpx.get(f"{served.root}/health", timeout=HANG_GUARD_S).json()["queue"]


def wait_until(predicate, served: Served) -> dict:
    return wait_for(lambda: (lambda status: predicate(status) and status)(queue_of(served)),
                    "the server's queue to reach the state asked for", poll_s=0.05, last=lambda: queue_of(served))


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
        t.join(HANG_GUARD_S)
    return results


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    model = save_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))
    port = free_port()
    # In this process (the command's own app, on uvicorn in a thread): the slow tests below start
    # `dynrag serve --batch` as a process.
    with serving_in_process(port, {"batch": 4, "queue_size": 4}, {"model": f"hf:{model}"}):
        yield Served(port, None)


@pytest.mark.slow  # over a second of CPU: `make test` runs it, `make test-fast` does not
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
def gated(tmp_path_factory):
    """Three requests at a time, one waiting, a short timeout, and every search behind a gate."""
    model = save_tiny_llama(tmp_path_factory.mktemp("tiny-llama-gated"))
    gates: list[GatedRetriever] = []

    def hold_searches(app):
        engine = app.state.engine
        engine.retriever = GatedRetriever(engine.retriever)
        gates.append(engine.retriever)

    port = free_port()
    with serving_in_process(port, {"batch": 3, "queue_size": 1, "timeout": TIMEOUT_S}, {"model": f"hf:{model}"},
                            prepare=hold_searches):
        try:
            yield Served(port, None), gates[0]
        finally:
            gates[0].open()  # nothing left waiting when the server stops


@pytest.mark.slow  # waits out the timeout
def test_a_timed_out_request_is_cancelled_while_the_rest_of_its_batch_finishes(gated):
    served, gate = gated
    short = questions(3)[1:]
    alone = {q: ask(served, q, QUICK).json()["answer"] for q in short}
    before = queue_of(served)
    gate.close()
    try:
        sends = [("held", questions(1)[0], HELD)] + [(f"short-{i}", q, QUICK) for i, q in enumerate(short)]
        results = concurrently(served, sends)
        assert gate.waiting == 1  # still at its search when it was answered: it timed out running
    finally:
        gate.open()  # its next call into the model sees the cancel
    assert results["held"].status_code == 504 and results["held"].json()["error"]["code"] == "timeout"
    assert f"timeout of {TIMEOUT_S} s" in results["held"].json()["error"]["message"]
    for i, question in enumerate(short):
        response = results[f"short-{i}"]
        assert response.status_code == 200, response.text
        assert response.json()["answer"] == alone[question]
    after = wait_until(lambda q: q["running"] == 0 and q["cancelled"] > before["cancelled"], served)
    assert after["timed_out"] - before["timed_out"] == 1 and after["cancelled"] - before["cancelled"] == 1
    assert after["completed"] - before["completed"] == 2 and after["failed"] == 0


@pytest.mark.slow  # waits out the timeout
def test_429_once_n_running_and_the_queue_are_full(gated):
    served, gate = gated
    before = queue_of(served)
    results: dict[int, httpx.Response] = {}
    threads = []
    gate.close()
    try:
        for i in range(4):  # three run (the batch) and wait at the gate, one waits in the queue
            t = threading.Thread(target=lambda i=i: results.__setitem__(i, ask(served, questions(4)[i], HELD)))
            t.start()
            threads.append(t)
            wait_until(lambda q, n=i + 1: q["running"] + q["waiting"] == n, served)
        wait_for(lambda: gate.waiting == 3, "the three running requests to reach the gate")
        status = queue_of(served)
        assert status["running"] == 3 and status["waiting"] == 1
        rejected = ask(served, questions(1)[0], QUICK)
        assert rejected.status_code == 429 and rejected.json()["error"]["code"] == "queue_full"
        assert int(rejected.headers["retry-after"]) >= 1
        for t in threads:
            t.join(HANG_GUARD_S)
    finally:
        gate.open()
    assert all(r.status_code == 504 for r in results.values()), {i: r.text for i, r in results.items()}
    after = wait_until(lambda q: q["running"] == 0 and q["waiting"] == 0, served)
    assert after["rejected"] - before["rejected"] == 1 and after["timed_out"] - before["timed_out"] == 4
    assert after["cancelled"] - before["cancelled"] == 4 and after["completed"] == before["completed"]
