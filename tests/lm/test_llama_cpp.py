"""The in-process llama.cpp backend on the bundled GGUF files (integration, slow): it answers,
its per-token figures are proper, a second identical call decodes the same tokens from the kept
cache, and what it cannot give (attention) is refused in one line."""

import hashlib

import numpy as np
import pytest

from dynrag.errors import ConfigError
from dynrag.lm import load_lm
from dynrag.lm.bundled import BUNDLED_MODELS, gguf_path, resolve_bundled
from dynrag.methods.prompting import PromptBuilder
from dynrag.retrieval.base import Hit

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make test builds it)")

PROMPT = "Question: What is the capital of France?\nAnswer: The capital of France is"


@pytest.fixture(scope="module")
def smollm2():
    return load_lm("bundled:smollm2?backend=llama.cpp", progress=False)


@pytest.mark.slow
def test_greedy_answer_with_proper_log_probabilities_and_entropies(smollm2):
    gen = smollm2.generate(PROMPT, 8, stop=("\n",))
    assert "Paris" in gen.text
    assert len(gen.token_ids) == len(gen.pieces) == len(gen.logprobs) == len(gen.entropies)
    assert np.all(gen.logprobs <= 0) and np.all(gen.entropies >= 0)
    assert gen.prompt_token_ids and len(gen.prompt_offsets) == len(gen.prompt_token_ids)
    again = smollm2.generate(PROMPT, 8, stop=("\n",))  # the prompt now comes from the kept cache
    # llama.cpp batches a cached prefix differently, which moves log-probabilities in the third decimal
    assert again.token_ids == gen.token_ids and np.allclose(again.logprobs, gen.logprobs, atol=0.02)
    assert smollm2.prefill_counts.reused_tokens > 0


@pytest.mark.slow
def test_stop_strings_cut_the_text_and_its_tokens(smollm2):
    gen = smollm2.generate(PROMPT, 12, stop=("Paris",))
    assert "Paris" not in gen.text and gen.stop_reason == "stop"
    assert "".join(gen.pieces) == gen.text


@pytest.mark.slow
def test_next_token_scores_prefer_the_right_word(smollm2):
    scores = smollm2.next_token_logprobs(PROMPT, [" Paris", " Berlin"])
    assert scores[0] > scores[1]


@pytest.mark.slow
def test_attention_is_refused_in_one_line(smollm2):
    with pytest.raises(ConfigError, match="backend=transformers"):
        smollm2.generate(PROMPT, 2, capture_attention=True)


@pytest.mark.slow
def test_same_answer_as_the_transformers_backend_on_the_same_weights(smollm2):
    hf = load_lm("bundled:smollm2", progress=False)
    assert "Paris" in hf.generate(PROMPT, 6, stop=("\n",)).text and "Paris" in smollm2.generate(PROMPT, 6).text


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUNDLED_MODELS))
def test_every_bundled_model_checks_out_and_reads_a_passage(name):
    model = resolve_bundled(name)
    path = gguf_path(model)
    if model.sha256:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 22):
                digest.update(chunk)
        assert digest.hexdigest() == model.sha256
    lm = load_lm(f"bundled:{name}?backend=llama.cpp", progress=False)
    assert lm.prompt_style == model.prompt_style
    builder = PromptBuilder.for_dataset("hotpotqa", n_exemplars=2)
    hits = [Hit("1", "Mira Tal", "Mira Tal, the founder of the Corrow Bay Lantern Festival, was born in Essenford.", 1.0)]
    prompt = builder.build("In which town was Mira Tal born?", hits, lm=lm, max_new_tokens=48)
    gen = lm.generate(prompt, 48)
    assert "Essenford" in gen.text
    # every prompt token's span spells that token, chat markers included, so segments map to tokens
    spelled = "".join(prompt.text[a:b] for a, b in gen.prompt_offsets)
    assert spelled == prompt.text
    question = gen.segment_positions("question")
    assert "Mira Tal born" in "".join(prompt.text[gen.prompt_offsets[i][0]:gen.prompt_offsets[i][1]] for i in question)


@pytest.mark.slow
def test_dragin_refuses_the_llama_cpp_backend_naming_the_one_that_works(smollm2):
    from dynrag.methods.dragin.method import Dragin, DraginOptions

    with pytest.raises(ConfigError, match="backend=transformers"):
        Dragin(smollm2, PromptBuilder.for_dataset("hotpotqa"), DraginOptions(), retriever=None)
