"""Request bodies whose text cannot be encoded as UTF-8 are refused at the boundary: a 400 that
names the field, before the request reaches the model (a scripted stand-in here, so no weights)."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from dynrag.methods.prompting import PromptBuilder
from dynrag.serve.app import create_app
from dynrag.serve.engine import Engine
from dynrag.serve.limits import ServeSettings
from tests.fakes import FakeRetriever, ScriptedLM


@pytest.fixture(scope="module")
def served():
    lm = ScriptedLM(lambda prompt: "So the answer is Ada.")
    engine = Engine(lm, FakeRetriever(), PromptBuilder.for_dataset("default"), "fake index")
    with TestClient(create_app(engine, ServeSettings())) as client:
        yield client, lm


def post(client, path: str, body: str):
    """``body`` is sent as it is: JSON text whose escapes (\\udcff) Python's encoder would not write."""
    return client.post(path, content=body.encode("ascii"), headers={"Content-Type": "application/json"})


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/v1/chat/completions",
     r'{"model": "direct", "messages": [{"role": "user", "content": "Who founded \udcff?"}]}', "messages.0.content"),
    ("/v1/chat/completions",
     r'{"model": "direct", "messages": [{"role": "user", "content": [{"type": "text", "text": "a\ud800"}]}]}',
     "messages.0.content"),
    ("/v1/chat/completions", r'{"model": "dir\udcffect", "messages": [{"role": "user", "content": "Who?"}]}',
     "model"),
    ("/v1/ask", r'{"question": "Who founded \udcff?", "method": "direct"}', "question"),
    ("/v1/ask", r'{"question": "Who?", "method": "direct", "options": {"exemplars": "\udfff"}}', "options"),
])
def test_text_that_cannot_be_encoded_is_a_400_naming_the_field(served, path, body, field):
    client, lm = served
    before = len(lm.prompts)
    r = post(client, path, body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == field
    assert error["message"].startswith(f"{field}: ") and "cannot be encoded as UTF-8" in error["message"]
    assert "lone surrogate" in error["message"] and "position" not in error["message"]
    assert len(lm.prompts) == before  # refused before the model saw anything


def test_an_extra_field_that_cannot_be_encoded_is_named_in_the_message(served):
    client, _ = served
    r = post(client, "/v1/chat/completions",
             r'{"model": "direct", "messages": [{"role": "user", "content": "Who?", "name": "\udcff"}]}')
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith("messages.0: name cannot be encoded as UTF-8")


def test_a_surrogate_pair_is_ordinary_text(served):
    client, lm = served
    r = post(client, "/v1/ask", r'{"question": "Who founded \ud83d\udcaf?", "method": "direct"}')
    assert r.status_code == 200, r.text
    assert r.json()["question"] == "Who founded \U0001f4af?"
    assert "Who founded \U0001f4af?" in lm.prompts[-1]
    json.dumps(r.json())
