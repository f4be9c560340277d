"""Every limit of the real server over raw HTTP, each answered in OpenAI's error shape.

The limits that need a request in flight (a disconnect, a full queue, a timeout) use a gated
server: the tiny model in this process with its searches behind a gate the test closes, so the
request is in flight by construction rather than by being slow."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import httpx
import pytest

from tests.fakes import GatedRetriever
from tests.serve.conftest import Served
from tests.servers import free_port, serving_in_process
from tests.tiny_models import save_tiny_llama
from tests.waiting import HANG_GUARD_S, wait_for

pytestmark = pytest.mark.slow

# A request that searches before it generates: held at the gate of a gated server (below) for as
# long as the test keeps the gate closed, so it outlasts a timeout by construction.
HELD = {"method": "single", "options": {"max_new_tokens": 8}}
TIGHT_TIMEOUT_S = 3


def error_of(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    err = response.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    return err


def ask(served, body, **kw):
    return httpx.post(f"{served.v1}/ask", json=body, headers=served.headers(), timeout=HANG_GUARD_S, **kw)


def health(served) -> dict:
    return httpx.get(f"{served.root}/health", timeout=HANG_GUARD_S).json()


def wait_until(predicate, served):
    return wait_for(lambda: (lambda status: predicate(status) and status)(health(served)["queue"]),
                    "the server's queue to reach the state asked for", poll_s=0.05, last=lambda: health(served)["queue"])


def test_oversized_body_is_413_with_or_without_a_length(served):
    big = {"question": "x" * 9000, "method": "direct"}
    err = error_of(ask(served, big), 413)
    assert err["code"] == "request_too_large" and "8192 bytes" in err["message"]

    def chunks():  # no Content-Length: the server counts what arrives
        for _ in range(20):
            yield b" " * 1024

    response = httpx.post(f"{served.v1}/ask", content=chunks(), headers={**served.headers(), "Content-Type": "application/json"})
    assert error_of(response, 413)["code"] == "request_too_large"


def test_over_long_question_is_400(served):
    err = error_of(ask(served, {"question": "why " * 120, "method": "direct"}), 400)
    assert err["code"] == "question_too_long" and "limit is 400" in err["message"] and err["param"] == "question"


def test_max_tokens_above_the_ceiling_is_400(served):
    body = {"model": "direct", "messages": [{"role": "user", "content": "Who?"}], "max_tokens": 129}
    response = httpx.post(f"{served.v1}/chat/completions", json=body, headers=served.headers())
    err = error_of(response, 400)
    assert err["code"] == "max_tokens_too_large" and "ceiling of 128" in err["message"]
    err = error_of(ask(served, {"question": "Who?", "method": "flare", "options": {"max_new_tokens": 500}}), 400)
    assert err["code"] == "max_tokens_too_large"


def test_unknown_method_and_option_list_the_valid_ones(served):
    err = error_of(ask(served, {"question": "Who?", "method": "dragon"}), 404)
    assert err["code"] == "model_not_found" and "dragin" in err["message"] and "flare" in err["message"]
    err = error_of(ask(served, {"question": "Who?", "method": "flare", "options": {"thetta": 0.2}}), 400)
    assert err["code"] == "unknown_option" and "'thetta'" in err["message"] and "theta" in err["message"]
    assert err["param"] == "options.thetta"
    err = error_of(ask(served, {"question": "Who?", "method": "flare", "options": {"theta": 3}}), 400)
    assert err["code"] == "invalid_option" and "theta" in err["message"]
    body = {"model": "flare", "messages": [{"role": "user", "content": "Who?"}], "colour": "red"}
    err = error_of(httpx.post(f"{served.v1}/chat/completions", json=body, headers=served.headers()), 400)
    assert "'colour'" in err["message"] and "theta" in err["message"]
    err = error_of(ask(served, {"question": "Who?", "method": "flare", "speed": 1}), 400)
    assert "speed" in err["message"] and "question" in err["message"]  # names the valid fields
    import openai  # here, not at the top: the fast run collects this module and needs no openai

    with pytest.raises(openai.NotFoundError, match="valid methods"):
        openai.OpenAI(base_url=served.v1, api_key=served.key, max_retries=0).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "Who?"}])


def test_every_v1_endpoint_wants_the_key_but_the_viewer_loads_without(served):
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": served.key}):
        for method, path, body in (("GET", "/v1/models", None), ("POST", "/v1/ask", {"question": "Who?"}),
                                   ("POST", "/v1/chat/completions", {"model": "direct", "messages": []})):
            response = httpx.request(method, f"{served.root}{path}", json=body, headers=headers)
            err = error_of(response, 401)
            assert err["code"] == "invalid_api_key" and response.headers["www-authenticate"] == "Bearer"
    import openai

    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=served.v1, api_key="wrong", max_retries=0).models.list()
    page = httpx.get(f"{served.root}/")
    assert page.status_code == 200 and "trace viewer" in page.text and "/static/viewer.js" in page.text
    assert httpx.get(f"{served.root}/static/viewer.js").status_code == 200
    assert httpx.get(f"{served.root}/health").status_code == 200


def gated_server(tmp_path_factory, settings: dict, config: Path | None = None):
    """`dynrag serve`'s app over the tiny random model, in this process, with every search behind a
    gate (GatedRetriever): a HELD request stays in flight while the gate is closed, for as long as the
    test wants, whatever the machine's speed."""
    model = save_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))
    gates: list[GatedRetriever] = []

    def hold_searches(app):
        app.state.engine.retriever = GatedRetriever(app.state.engine.retriever)
        gates.append(app.state.engine.retriever)

    port = free_port()
    with serving_in_process(port, settings, {"model": f"hf:{model}"}, config=config, prepare=hold_searches):
        try:
            yield Served(port, None), gates[0]
        finally:
            gates[0].open()


@pytest.fixture(scope="module")
def held(tmp_path_factory):
    """A gated server whose timeout (the default) is far longer than any of these tests waits."""
    yield from gated_server(tmp_path_factory, {"queue_size": 4})


def test_client_disconnect_cancels_the_work(held, demo_question):
    served, gate = held
    before = health(served)["queue"]
    # A plain socket so the test decides exactly when the client goes away.
    import json as _json

    gate.close()
    try:
        body = _json.dumps({"question": demo_question.question, **HELD}).encode()
        sock = socket.create_connection(("127.0.0.1", served.port))
        sock.sendall(b"POST /v1/ask HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        wait_for(lambda: gate.waiting == 1, "the request to reach its search")
        sock.close()
        wait_until(lambda q: q["disconnected"] > before["disconnected"], served)
    finally:
        gate.open()  # its next call into the model sees the cancel
    after = wait_until(lambda q: q["running"] == 0 and q["cancelled"] > before["cancelled"], served)
    assert after["completed"] == before["completed"]  # stopped, not finished

    # The same for a stream the client stops reading while staying connected. The line iterator is
    # kept: a temporary one (next(r.iter_lines())) is collected at once, and closing it closes
    # httpx's connection, so the server saw a disconnect before the job had run.
    body = {"model": HELD["method"], "messages": [{"role": "user", "content": demo_question.question}],
            "stream": True, "options": HELD["options"]}
    start = health(served)["queue"]
    gate.close()
    try:
        with httpx.stream("POST", f"{served.v1}/chat/completions", json=body, timeout=HANG_GUARD_S) as r:
            lines = r.iter_lines()
            first = next(lines)
            assert first.startswith("data: ") and '"role": "assistant"' in first
            wait_for(lambda: gate.waiting == 1, "the streamed request to reach its search")
            running = health(served)["queue"]
            assert running["running"] == 1 and running["cancelled"] == start["cancelled"]  # connected: not stopped
        wait_until(lambda q: q["disconnected"] > start["disconnected"], served)
    finally:
        gate.open()
    final = wait_until(lambda q: q["running"] == 0 and q["cancelled"] > start["cancelled"], served)
    assert final["completed"] == before["completed"]  # stopped, never finished


@pytest.fixture(scope="module")
def tight(tmp_path_factory):
    """One request at a time (--batch 1), one may wait while it runs, a short timeout, and a run
    configuration whose method and options are the default for requests that name none."""
    config = tmp_path_factory.mktemp("serve-config") / "run.yaml"
    # Its default options are over the ceiling, so a request relying on them is refused (no model time).
    config.write_text("method: direct\noptions:\n  max_new_tokens: 600\n")
    yield from gated_server(tmp_path_factory, {"batch": 1, "queue_size": 1, "timeout": TIGHT_TIMEOUT_S}, config)


def test_queue_full_is_429_with_retry_after_and_the_timeout_cancels(tight, demo_question):
    served, gate = tight
    results: dict[str, httpx.Response] = {}

    def send(name):
        results[name] = httpx.post(f"{served.v1}/ask", json={"question": demo_question.question, **HELD},
                                   timeout=HANG_GUARD_S)

    gate.close()
    try:
        first = threading.Thread(target=send, args=("running",))
        first.start()
        wait_for(lambda: gate.waiting == 1, "the first request to reach its search")
        second = threading.Thread(target=send, args=("waiting",))
        second.start()
        wait_until(lambda q: q["waiting"] == 1, served)
        rejected = httpx.post(f"{served.v1}/ask", json={"question": demo_question.question, "method": "direct"})
        err = error_of(rejected, 429)
        assert err["code"] == "queue_full" and err["type"] == "rate_limit_error"
        assert int(rejected.headers["retry-after"]) >= 1
        first.join(HANG_GUARD_S)
        second.join(HANG_GUARD_S)
    finally:
        gate.open()
    err = error_of(results["running"], 504)  # held at its search past the timeout
    assert err["code"] == "timeout" and f"{TIGHT_TIMEOUT_S} s" in err["message"]
    assert results["waiting"].status_code == 504  # it never got the model in time
    status = wait_until(lambda q: q["running"] == 0 and q["waiting"] == 0 and q["cancelled"] == 2, served)
    assert status["rejected"] == 1 and status["timed_out"] == 2 and status["cancelled"] == 2
    assert status["completed"] == 0


def test_a_request_naming_no_method_gets_the_config_files_method_and_options(tight):
    served, _ = tight
    err = error_of(httpx.post(f"{served.v1}/ask", json={"question": "Who?", "options": {"thetta": 1}}), 400)
    assert "method 'direct'" in err["message"] and "thetta" in err["message"]
    err = error_of(httpx.post(f"{served.v1}/ask", json={"question": "Who?"}), 400)
    assert err["code"] == "max_tokens_too_large" and "600" in err["message"]
