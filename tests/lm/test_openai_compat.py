"""The openai: backend against a scripted HTTP server on loopback (parsing, stops, retries, errors).

The real servers (llama.cpp, dynrag serve) are in test_openai_llamacpp.py; here a small
http.server plays a server whose every answer the test chooses, so each failure path is exercised.
"""

from __future__ import annotations

import json
import math
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from dynrag.errors import ConfigError, DynragError
from dynrag.lm import load_lm
from dynrag.lm.openai_compat import OpenAICompatLM, parse_spec, topk_entropy
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.registry import build_method
from tests.waiting import HANG_GUARD_S


def test_topk_entropy_against_hand_computed_values():
    # All the mass in the top-k: the exact entropy of a uniform distribution over 4.
    assert topk_entropy(np.log([0.25] * 4)) == pytest.approx(math.log(4))
    # p = .5, .25 in the top-2 and .25 left over, lumped into one outcome: 3 * (.25 ln 4 ... ) by hand.
    expected = -(0.5 * math.log(0.5) + 0.25 * math.log(0.25) + 0.25 * math.log(0.25))
    assert topk_entropy([math.log(0.5), math.log(0.25)]) == pytest.approx(expected)
    assert topk_entropy([0.0]) == pytest.approx(0.0)  # certain
    assert topk_entropy([]) == 0.0
    # Rounding that makes the top-k sum past 1 is renormalised, never negative.
    assert topk_entropy([math.log(0.6), math.log(0.41)]) >= 0.0


def test_topk_entropy_is_a_lower_bound_of_the_full_entropy():
    rng = np.random.default_rng(0)
    for _ in range(20):
        p = rng.dirichlet(np.ones(50) * 0.3)
        full = float(-(p * np.log(p)).sum())
        top = np.sort(np.log(p))[::-1][:5]
        assert topk_entropy(top) <= full + 1e-9


def test_spec_parsing_and_its_errors():
    assert parse_spec("openai:http://127.0.0.1:8080/v1/#smollm2") == ("http://127.0.0.1:8080/v1", "smollm2")
    with pytest.raises(ConfigError, match="names no model"):
        parse_spec("openai:http://127.0.0.1:8080/v1")
    with pytest.raises(ConfigError, match="not an http"):
        load_lm("openai:127.0.0.1:8080#m")
    assert "openai:BASE_URL#MODEL" in str(pytest.raises(ConfigError, load_lm, "gpt:x").value)


class Script:
    """What the fake server does: a list of responses, one per request (the last one repeats)."""

    def __init__(self, responses):
        self.responses = list(responses)
        self.requests: list[dict] = []
        self.chunks_sent = 0
        self.stream_ended = threading.Event()
        self.lock = threading.Lock()

    def next(self):
        with self.lock:
            return self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]


def sse_tokens(tokens, finish="length", top=3, delay=0.0):
    """A streamed completion: one chunk per token, each with its log-probability and top-k."""
    def body(handler, script):
        for i, (tok, p) in enumerate(tokens):
            lp = math.log(p)
            alt = {f"alt{j}": math.log((1 - p) / top) for j in range(top - 1)}
            chunk = {"choices": [{"index": 0, "text": tok, "finish_reason": None,
                                  "logprobs": {"tokens": [tok], "token_logprobs": [lp], "text_offset": [i],
                                               "top_logprobs": [{tok: lp, **alt}]}}]}
            handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            handler.wfile.flush()
            script.chunks_sent += 1
            time.sleep(delay)
        if finish:
            end = {"choices": [{"index": 0, "text": "", "finish_reason": finish, "logprobs": None}]}
            handler.wfile.write(f"data: {json.dumps(end)}\n\n".encode())
        handler.wfile.write(b"data: [DONE]\n\n")
    return (200, body)


@pytest.fixture
def server():
    scripts: dict[str, Script] = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            script = scripts["s"]
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            script.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
            status, content = script.next()
            if callable(content):
                self.send_response(status)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    content(self, script)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                script.stream_ended.set()
                self.close_connection = True
                return
            data = json.dumps(content).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status == 429:
                self.send_header("Retry-After", "0")
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # shutdown() waits out one poll interval; the default half second cost each test that much.
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()

    def use(*responses):
        scripts["s"] = Script(responses)
        return scripts["s"]

    use.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    yield use
    httpd.shutdown()
    httpd.server_close()


def lm_for(url, **kw):
    kw.setdefault("backoff", 0.01)
    return OpenAICompatLM(url, "tiny", **kw)


WORDS = [("Paris", 0.9), (" is", 0.8), (" big", 0.3), (".", 0.95), (" It", 0.7), (" has", 0.6)]


def test_a_streamed_completion_becomes_a_generation_with_probabilities_from_the_server(server):
    script = server(sse_tokens(WORDS[:3], finish="stop"))
    gen = lm_for(server.url, api_key="k1").generate("Q: where? A:", 16)
    assert gen.text == "Paris is big" and gen.pieces == ["Paris", " is", " big"]
    assert np.allclose(np.exp(gen.logprobs), [0.9, 0.8, 0.3], atol=1e-6)
    assert gen.stop_reason == "eos" and gen.attention is None
    # The estimate from the top-3: the chosen token plus two alternatives sharing the rest.
    p = 0.3
    expected = -(p * math.log(p) + 2 * ((1 - p) / 3) * math.log((1 - p) / 3)) - ((1 - p) / 3) * math.log((1 - p) / 3)
    assert gen.entropies[2] == pytest.approx(expected, rel=1e-5)
    sent = script.requests[0]
    assert sent["path"] == "/v1/completions" and sent["auth"] == "Bearer k1"
    body = sent["body"]
    assert body["temperature"] == 0 and body["repeat_penalty"] == 1.0 and body["stream"] is True
    assert body["logprobs"] == 20 and body["max_tokens"] == 16 and body["prompt"] == "Q: where? A:"


def test_stop_after_keeps_the_sentence_end_and_closes_the_stream_early(server):
    # Long enough that a slow client cannot let the server write it all first: without the early
    # close the stream would run for a minute, with it the server's next writes fail and it stops.
    many = WORDS + [(" more", 0.5)] * 30_000
    script = server(sse_tokens(many, delay=0.002))
    gen = lm_for(server.url).generate("x", 300, stop_after=[". "])
    assert gen.text == "Paris is big." and gen.stop_reason == "stop_after"
    assert gen.decoded_tokens == 5  # " It" showed the space after "." and was trimmed
    assert script.stream_ended.wait(HANG_GUARD_S)
    assert script.chunks_sent < len(many)  # the server saw the client go and stopped writing


def test_stop_strings_and_stop_when_match_the_local_backend(server):
    server(sse_tokens(WORDS))
    assert lm_for(server.url).generate("x", 50, stop=[" big"]).text == "Paris is"
    seen = []
    gen = lm_for(server.url).generate("x", 50, stop_when=lambda st: seen.append(len(st.pieces)) or len(st.pieces) == 2)
    assert gen.stop_reason == "callback" and gen.text == "Paris is" and seen == [1, 2]
    assert lm_for(server.url).generate("x", 4).stop_reason == "length"


def test_5xx_and_429_are_retried_with_backoff(server):
    script = server((503, {"error": {"message": "loading"}}), (429, {"error": {"message": "busy"}}),
                    sse_tokens(WORDS[:2], finish="stop"))
    assert lm_for(server.url).generate("x", 8).text == "Paris is"
    assert len(script.requests) == 3


def test_a_stream_cut_short_is_retried(server):
    script = server(sse_tokens(WORDS[:2], finish=None), sse_tokens(WORDS[:3], finish="stop"))
    assert lm_for(server.url).generate("x", 8).text == "Paris is big"
    assert len(script.requests) == 2


def test_errors_name_the_server_and_what_it_said(server):
    script = server((400, {"error": {"message": "model 'tiny' not found"}}))
    with pytest.raises(DynragError, match="HTTP 400: model 'tiny' not found"):
        lm_for(server.url).generate("x", 8)
    assert len(script.requests) == 1  # a 4xx is not retried
    server((500, {"error": {"message": "boom"}}))
    with pytest.raises(DynragError, match="failed 3 times; last: .*HTTP 500: boom"):
        lm_for(server.url, retries=2).generate("x", 8)


def test_no_server_is_retried_then_reported():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    with pytest.raises(DynragError, match=f"127.0.0.1:{port}/v1 failed 3 times; last: .*ConnectError"):
        lm_for(f"http://127.0.0.1:{port}/v1", retries=2).generate("x", 8)


def test_a_silent_server_times_out(server):
    server(sse_tokens(WORDS, delay=2.0))
    with pytest.raises(DynragError, match="no answer within 0.5 s"):
        lm_for(server.url, timeout=0.5).generate("x", 8)


def test_count_tokens_uses_the_servers_tokenizer(server):
    script = server((404, {"detail": "Not Found"}), (200, {"tokens": [1, 2, 3]}))
    lm = lm_for(server.url)
    assert lm.count_tokens("a b c") == 3
    assert [r["path"] for r in script.requests] == ["/extras/tokenize", "/tokenize"]


def test_dragin_refuses_this_backend_and_says_why_and_what_to_use():
    lm = lm_for("http://127.0.0.1:9/v1")  # never contacted
    assert lm.capabilities.attention is False and lm.capabilities.logprobs is True
    with pytest.raises(ConfigError) as err:
        build_method("dragin", lm, object(), {}, PromptBuilder.for_dataset("default"))
    message = str(err.value)
    assert "attention" in message and "http://127.0.0.1:9/v1" in message
    assert "--model bundled" in message and "flare" in message
    with pytest.raises(ConfigError, match="cannot give attention"):
        lm.generate("x", 4, capture_attention=True)


def test_next_token_logprobs_match_candidates_by_their_first_token(server):
    top = {"Search": math.log(0.5), "Answer": math.log(0.3), "S": math.log(0.1), " the": math.log(0.05)}
    script = server((200, {"choices": [{"text": "Search", "finish_reason": "length",
                                        "logprobs": {"tokens": ["Search"], "token_logprobs": [math.log(0.5)],
                                                     "top_logprobs": [top]}}]}))
    out = lm_for(server.url).next_token_logprobs("Follow up: who?\n", ["Search results:", "Answer:", "Maybe"])
    # "Search" beats the shorter prefix "S"; "Maybe" is in no top-k token: at most the k-th.
    assert np.allclose(np.exp(out), [0.5, 0.3, 0.05])
    body = script.requests[0]["body"]
    assert body["max_tokens"] == 1 and body["stream"] is False and body["temperature"] == 0
