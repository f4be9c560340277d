"""The real server driven by the official `openai` client: models, chat, streaming; /v1/ask's trace."""

from __future__ import annotations

import json

import httpx
import pytest

from dynrag.methods.base import Answer, Trace
from dynrag.methods.registry import method_names
from tests.waiting import HANG_GUARD_S

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(served):
    import openai  # here, not at the top: the fast run collects this module and needs no openai

    return openai.OpenAI(base_url=served.v1, api_key=served.key, max_retries=0, timeout=HANG_GUARD_S)


def test_models_lists_every_method_with_its_options(client):
    models = client.models.list()
    ids = [m.id for m in models.data]
    assert ids == method_names()
    dragin = next(m for m in models.data if m.id == "dragin")
    assert dragin.model_extra["available"] is True  # the bundled model gives attention
    assert {"theta", "variant", "max_new_tokens"} <= set(dragin.model_extra["options"])
    assert dragin.model_extra["options"]["variant"]["enum"] == ["paper", "reference"]


def test_chat_completion_answers_with_the_trace_under_an_extra_key(client, demo_question):
    response = client.chat.completions.create(
        model="single",
        messages=[{"role": "system", "content": "ignored"}, {"role": "user", "content": demo_question.question}],
        extra_body={"options": {"k": 2}},
    )
    content = response.choices[0].message.content
    assert response.object == "chat.completion" and response.choices[0].finish_reason == "stop"
    assert "so the answer is" in content.lower()
    trace = response.model_extra["dynrag"]
    assert trace["answer"] == content and trace["method"] == "single" and trace["options"]["k"] == 2
    assert trace["question"] == demo_question.question
    hits = trace["retrievals"][0]["hits"]
    assert len(hits) == 2 and all(h["id"].startswith("demo-") for h in hits)
    assert set(demo_question.supporting) & {h["id"] for h in hits}  # the demo index, really searched
    assert response.usage.completion_tokens == trace["generated_tokens"] > 0


def test_streaming_sends_openai_chunks_and_done(client, served, demo_question):
    stream = client.chat.completions.create(
        model="direct", messages=[{"role": "user", "content": demo_question.question}], stream=True, max_tokens=48,
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    trace = last.model_extra["dynrag"]
    assert text == trace["answer"] and trace["options"]["max_new_tokens"] == 48
    assert len([c for c in chunks if c.choices[0].delta.content]) > 3  # word by word, not one blob

    # The wire format itself: every data line a JSON chunk, the last one [DONE].
    body = {"model": "direct", "messages": [{"role": "user", "content": demo_question.question}],
            "stream": True, "max_tokens": 16}
    with httpx.stream("POST", f"{served.v1}/chat/completions", json=body, headers=served.headers(),
                      timeout=HANG_GUARD_S) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        data = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    assert all(json.loads(d)["object"] == "chat.completion.chunk" for d in data[:-1])


def test_ask_returns_the_trace_schema_of_ask_trace(served, demo_question):
    body = {"question": demo_question.question, "method": "dragin",
            "options": {"theta": 0.0, "max_retrievals": 1, "max_new_tokens": 48}}
    response = httpx.post(f"{served.v1}/ask", json=body, headers=served.headers(), timeout=HANG_GUARD_S)
    assert response.status_code == 200, response.text
    trace = response.json()
    # The same keys `dynrag ask --trace` writes: Answer.to_dict().
    assert set(trace) == set(Answer("", "", Trace("q", "m", "lm")).to_dict())
    assert trace["method"] == "dragin" and trace["options"]["theta"] == 0.0
    assert len(trace["retrievals"]) == 1 and trace["retrievals"][0]["query"].strip()
    scored = [s for s in trace["steps"] if "score" in s["details"]]
    assert scored and len(scored[0]["details"]["words"]) == len(scored[0]["details"]["score"])
    assert response.headers["x-request-id"]


def test_request_ids_are_echoed(served):
    response = httpx.get(f"{served.root}/health", headers={"X-Request-Id": "abc-123"})
    assert response.headers["x-request-id"] == "abc-123"
    health = response.json()
    assert health["status"] == "ok" and health["model"].startswith("bundled:") and health["auth"] is True
