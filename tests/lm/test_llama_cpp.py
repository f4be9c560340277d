"""The in-process llama.cpp backend on the bundled GGUF files (integration, slow): it answers,
its per-token figures are proper, a second identical call decodes the same tokens from the kept
cache, and attention read from llama.cpp's graph is what transformers computes on the same
tokens, up to quantised arithmetic (DRAGIN runs on it)."""

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
def test_attention_rows_are_those_transformers_computes_for_the_same_tokens(smollm2):
    gen = smollm2.generate(PROMPT, 10, capture_attention=True)
    hf = load_lm("bundled:smollm2", progress=False)
    ids = gen.prompt_token_ids + gen.token_ids
    reference = hf.attention_pass(ids, bos=False)  # transformers' rows for llama.cpp's tokens
    p = gen.prompt_length
    assert len(gen.attention) == len(gen) >= 3
    for k, row in enumerate(gen.attention):
        assert len(row) == p + k + 1 and abs(float(row.sum()) - 1) < 1e-4
        # the quantised weights (Q4_1) move a row by at most about 0.01 (measured 0.009)
        np.testing.assert_allclose(row, reference[p + k, : p + k + 1], atol=0.02)
    np.testing.assert_allclose(smollm2.attention_pass(gen.token_ids), hf.attention_pass(gen.token_ids), atol=0.02)


@pytest.mark.slow
def test_a_stop_callback_sees_the_rows_transformers_would_show_it(smollm2):
    seen = []

    def watch(state):
        seen.append((len(state.token_ids), len(state.attention_rows)))
        return len(state.token_ids) == 3

    gen = smollm2.generate(PROMPT, 12, capture_attention=True, stop_when=watch)
    assert len(gen) == 3 and gen.stop_reason == "callback" and len(gen.attention) == 3
    assert seen == [(1, 0), (2, 1), (3, 2)]


def test_without_an_attention_graph_attention_is_refused_in_one_line():
    from dynrag.lm.llama_cpp import LlamaCppLM

    lm = LlamaCppLM.__new__(LlamaCppLM)  # attention is refused before the GGUF model is touched
    lm.name, lm.graph = "hf:x#m.gguf", None
    lm._refused = "model 'hf:x#m.gguf': llama.cpp tensor kq_soft_max-29: 0 attention rows for 2 tokens evaluated"
    with pytest.raises(ConfigError, match="kq_soft_max-29") as info:
        lm.attention_pass([1, 2])
    assert "\n" not in str(info.value)


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
def test_dragin_on_llama_cpp_retrieves_where_it_does_on_transformers(smollm2, tmp_path):
    """The same weights, the same question: DRAGIN's first trigger and query are the same on both
    backends (the tokens before it agree here), and on llama.cpp it answers from what it found."""
    from dynrag.corpus.passage import Passage
    from dynrag.methods.dragin.method import Dragin, DraginOptions
    from dynrag.retrieval.bm25 import BM25Index

    texts = ["Mira Tal, the founder of the Corrow Bay Lantern Festival, was born in Essenford.",
             "The Corrow Bay Lantern Festival is held every autumn on the harbour."]
    BM25Index.build([Passage(f"p{i}", "", t) for i, t in enumerate(texts)], tmp_path / "idx", progress=False)
    index = BM25Index.load(tmp_path / "idx", backend="numpy")
    question = "In which town was the founder of the Corrow Bay Lantern Festival born?"
    answers = {}
    THETA = 0.1  # low enough that the first proper noun triggers on both backends
    for name, lm in (("llama.cpp", smollm2), ("transformers", load_lm("bundled:smollm2", progress=False))):
        method = Dragin(lm, PromptBuilder.for_dataset("hotpotqa", n_exemplars=2),
                        DraginOptions(theta=THETA, max_new_tokens=48), retriever=index)
        answers[name] = method.answer(question)
    fast, reference = answers["llama.cpp"].trace.retrievals, answers["transformers"].trace.retrievals
    assert fast and reference
    assert fast[0].query == reference[0].query
    # the same trigger word; its score moves in the second decimal (llama.cpp's entropies and
    # attention come from the quantised weights)
    assert fast[0].reason.split(" at ")[1] == reference[0].reason.split(" at ")[1]
    assert "Essenford" in answers["llama.cpp"].final_answer


@pytest.mark.slow
def test_token_helpers_spell_the_text_back(smollm2):
    ids = smollm2.encode("The capital of France is Paris.")
    assert smollm2.decode(ids) == "The capital of France is Paris."
    assert "".join(smollm2.raw_tokens(ids)) == "The capital of France is Paris."


@pytest.mark.slow
def test_a_loaded_model_never_claims_more_than_its_backend_declares(smollm2):
    """Commands place rows by BACKEND_CAPABILITIES before loading; a loaded llama.cpp model may give
    less (no attention graph) but never a capability the table denies it."""
    from dataclasses import asdict

    from dynrag.lm.base import BACKEND_CAPABILITIES

    declared = asdict(BACKEND_CAPABILITIES["llama.cpp"])
    assert all(declared[k] or not v for k, v in asdict(smollm2.capabilities).items())
    assert smollm2.capabilities.attention and smollm2.capabilities.hidden_states
