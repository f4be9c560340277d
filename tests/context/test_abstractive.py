"""The abstractive compressor: the model's summary replaces the passages, in the model's own prompt style."""

from __future__ import annotations

import pytest

from dynrag.context.abstractive import INSTRUCTION, AbstractiveCompressor, summary_prompt
from dynrag.context.registry import COMPRESSORS
from dynrag.errors import ConfigError
from dynrag.lm.chat import ChatFrame
from dynrag.retrieval.base import Hit
from tests.fakes import ScriptedLM

HITS = [Hit("p1", "Lyon", "Lyon is a city in France. The Rhone flows through Lyon.", 2.0),
        Hit("p2", "Paris", "Paris is the capital of France.", 1.0)]


def test_the_summary_becomes_one_hit_naming_the_passages_it_came_from():
    lm = ScriptedLM(lambda prompt: " The Rhone flows through Lyon.\n\nMore text the stop cuts off")
    compressor = COMPRESSORS.open("abstractive", {"compress_max_new_tokens": 40}, lm=lm, embedder=lambda: None)
    out, details = compressor.compress("Which river flows through Lyon?", HITS)
    assert [(h.id, h.text) for h in out] == [("summary:p1+p2", "The Rhone flows through Lyon.")]
    assert details["words_before"] == 17 and details["words_after"] == 5 and details["max_new_tokens"] == 40
    prompt = lm.prompts[0]
    assert prompt.startswith(INSTRUCTION) and "Lyon: Lyon is a city" in prompt and prompt.endswith("Facts:")


def test_an_empty_summary_keeps_the_passages():
    out, details = AbstractiveCompressor(ScriptedLM(lambda prompt: "   ")).compress("q?", HITS)
    assert out == HITS and details["words_after"] == details["words_before"]


def test_a_chat_model_gets_the_request_inside_its_template():
    lm = ScriptedLM(lambda prompt: "x")
    lm.prompt_style, lm.chat_frame = "chat", ChatFrame("<s>", "</s><u>", "</u><a>")
    assert summary_prompt(lm, "Where?", "A: b") == f"<s>{INSTRUCTION}</s><u>Passages:\nA: b\n\nQuestion: Where?</u><a>Facts:"


def test_bad_settings_name_themselves():
    with pytest.raises(ConfigError, match="needs a language model"):
        AbstractiveCompressor(None)
    with pytest.raises(ConfigError, match="compress_max_new_tokens"):
        COMPRESSORS.open("abstractive", {"compress_max_new_tokens": 0}, lm=ScriptedLM(str), embedder=lambda: None)
