"""Capabilities: a backend without one fails where it is needed, naming the model and what to use."""

import pytest

from dynrag.context.compress import SelectiveContextCompressor
from dynrag.errors import ConfigError
from dynrag.lm.base import Capabilities, LanguageModel, WithoutOptionalCapabilities
from dynrag.methods.registry import build_method
from dynrag.rerank.lm_pointwise import LMPointwiseReranker
from tests.fakes import FakeRetriever


class TextOnly(WithoutOptionalCapabilities):
    """What an HTTP completion server gives: text and per-token log-probabilities, no attention."""

    name = "openai:http://127.0.0.1:1/v1#m"

    def generate(self, prompt, max_new_tokens, stop=(), capture_attention=False, stop_after=(), stop_when=None):
        raise AssertionError("not reached: the capability checks come first")

    def count_tokens(self, text):
        return len(text.split())


def test_a_backend_without_optional_capabilities_is_still_a_language_model():
    lm = TextOnly()
    assert isinstance(lm, LanguageModel)
    assert lm.capabilities == Capabilities(attention=False, logprobs=True)
    for call, what in [
        (lambda: lm.attention_pass([1, 2]), "attention pass"),
        (lambda: lm.next_token_logprobs("p", [" yes"]), "next-token probabilities"),
        (lambda: lm.text_logprobs("t"), "token log-probabilities"),
        (lambda: lm.first_token_id("t"), "next-token probabilities"),
    ]:
        with pytest.raises(ConfigError, match=what) as e:
            call()
        assert lm.name in str(e.value)


def test_each_caller_names_the_model_and_an_alternative():
    lm, retriever = TextOnly(), FakeRetriever({})
    with pytest.raises(ConfigError, match=r"method 'dragin' needs last-layer attention .*openai:http.*flare"):
        build_method("dragin", lm, retriever)
    with pytest.raises(ConfigError, match=r"rerank=lm needs next-token probabilities.*use rerank=embedding"):
        LMPointwiseReranker(lm)
    with pytest.raises(ConfigError, match=r"compress=selective needs token log-probabilities.*use compress=extractive"):
        SelectiveContextCompressor(lm)
    with pytest.raises(ConfigError, match="rerank=embedding"):
        build_method("single", lm, retriever, {"rerank": "lm"})
    build_method("flare", lm, retriever)  # FLARE needs only log-probabilities


def test_the_reference_variant_needs_an_attention_pass():
    class DecodingOnly(TextOnly):
        capabilities = Capabilities(attention=True, logprobs=True)

    with pytest.raises(ConfigError, match=r"variant=reference needs an extra attention pass.*variant=paper"):
        build_method("dragin", DecodingOnly(), FakeRetriever({}), {"variant": "reference"})
    build_method("dragin", DecodingOnly(), FakeRetriever({}))
