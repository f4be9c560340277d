"""SeaKR's sampled hidden states on llama.cpp: the bookkeeping as pure functions, then the bundled
SmolLM2 GGUF (slow): rows read from the graph where a single pass reads them, draws fixed by the
seed, the prompt evaluated once, and SeaKR answering on this backend."""

import numpy as np
import pytest

from dynrag.errors import ConfigError
from dynrag.lm.base import Prompt
from dynrag.lm.hidden import resolve_layer
from dynrag.lm.llama_hidden import cells_needed

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make test builds it)")

PROMPT = "Question: Who wrote the play Hamlet?\nAnswer:"


def test_the_middle_block_and_a_layer_out_of_range():
    assert resolve_layer(30, None) == 14 and resolve_layer(24, None) == 11 and resolve_layer(1, None) == 0
    assert resolve_layer(30, 29) == 29
    with pytest.raises(ConfigError, match=r"layer=30: this model has decoder blocks 0\.\.29"):
        resolve_layer(30, 30)


def test_cells_hold_the_prompt_once_and_every_row_with_its_eos():
    assert cells_needed(100, 20, 30) == 768  # 100 + 20 * 31 = 720, padded to 256s
    assert cells_needed(0, 1, 255) == 256


@pytest.fixture(scope="module")
def smollm2():
    from dynrag.lm import load_lm

    return load_lm("bundled:smollm2?backend=llama.cpp", progress=False)


def single_pass_state(lm, ids, name):
    """The tensor ``name``'s row for the last of ``ids``, from one pass over them alone in a fresh
    context of one sequence: the reference a batched row must match."""
    from llama_cpp import _internals

    from dynrag.lm.llama_hidden import GraphRows

    graph = GraphRows()
    base = lm.llama.context_params
    params = type(base).from_buffer_copy(base)
    params.n_ctx, params.cb_eval = 512, graph.callback
    context = _internals.LlamaContext(model=lm.llama._model, params=params, verbose=False)
    batch = _internals.LlamaBatch(n_tokens=len(ids), embd=0, n_seq_max=1, verbose=False)
    try:
        batch.set_batch(ids, n_past=0, logits_all=False)
        return graph.evaluate(lambda: context.decode(batch), name, len(ids))[-1]
    finally:
        batch.close()
        context.close()


@pytest.mark.slow
def test_one_greedy_row_is_the_greedy_generation(smollm2):
    """One row decodes from the prompt's cache as ``generate`` does, so it writes the same tokens.
    With more rows it need not: each row's own tokens sit in other KV cells, so its attention sums
    in another order, and where two tokens nearly tie the rows part."""
    greedy = smollm2.generate(PROMPT, 12, stop=("\n",))
    (text,) = smollm2.sample_hidden_states(PROMPT, 1, None, 12, stop=("\n",), temperature=0).texts
    assert text == greedy.text and text.strip()


@pytest.mark.slow
@pytest.mark.parametrize("representation,tensor", [("ffn", "ffn_out-14"), ("residual", "l_out-14")])
def test_each_row_reads_the_state_a_single_pass_over_its_tokens_reads(smollm2, representation, tensor):
    samples = smollm2.sample_hidden_states(PROMPT, 5, None, 12, stop=("\n",), representation=representation,
                                           temperature=1.0, top_k=50, top_p=0.9, seed=3)
    assert samples.states.shape == (5, 576) and samples.states.dtype == np.float32
    prompt_ids = smollm2.prompt_tokens(Prompt.of(PROMPT))[0]
    for ids, text, state in zip(samples.token_ids, samples.texts, samples.states):
        assert text.startswith(smollm2.decode(ids))  # the token that ended a row is in its text, not its ids
        want = single_pass_state(smollm2, [*prompt_ids, *ids, int(smollm2.llama.token_eos())], tensor)
        cosine = float(want @ state / np.linalg.norm(want) / np.linalg.norm(state))
        assert cosine > 0.999, (text, cosine)


@pytest.mark.slow
def test_the_seed_fixes_the_draws_and_the_prompt_is_taken_from_the_decoding_context(smollm2):
    options = dict(stop=("\n",), temperature=1.0, top_k=50, top_p=0.9, seed=5)
    smollm2.sample_hidden_states("Question: Where is Lyon?\nAnswer:", 9, 3, 20, **options)  # grows the scratch context
    first = smollm2.sample_hidden_states(PROMPT, 6, None, 10, **options)
    before = smollm2.prefill_counts
    again = smollm2.sample_hidden_states(PROMPT, 6, None, 10, **options)
    assert again.texts == first.texts and np.array_equal(again.states, first.states)
    # the prompt was evaluated once, in the decoding context; the second call evaluated its last token only
    after = smollm2.prefill_counts
    assert after.prompt_tokens - before.prompt_tokens - (after.reused_tokens - before.reused_tokens) == 1
    assert len(set(first.texts)) > 1  # sampled, not greedy
    assert all(len(ids) <= 10 and "\n" not in text for ids, text in zip(first.token_ids, first.texts))
    other = smollm2.sample_hidden_states(PROMPT, 6, None, 10, **{**options, "seed": 6})
    assert other.texts != first.texts


@pytest.mark.slow
def test_the_two_representations_differ_and_bad_choices_are_refused(smollm2):
    ffn = smollm2.sample_hidden_states(PROMPT, 2, 3, 4, temperature=0, representation="ffn")
    residual = smollm2.sample_hidden_states(PROMPT, 2, 3, 4, temperature=0, representation="residual")
    assert not np.allclose(ffn.states, residual.states)
    with pytest.raises(ConfigError, match=r"layer=30: this model has decoder blocks 0\.\.29"):
        smollm2.sample_hidden_states(PROMPT, 2, 30, 4)
    with pytest.raises(ConfigError, match=r"representation='mlp': choose one of ffn, residual"):
        smollm2.sample_hidden_states(PROMPT, 2, None, 4, representation="mlp")
    with pytest.raises(ConfigError, match=r"samples=100000: llama.cpp decodes at most \d+ sequences together"):
        smollm2.sample_hidden_states(PROMPT, 100000, None, 4)


@pytest.mark.slow
def test_seakr_answers_and_retrieves_on_llama_cpp(smollm2, tmp_path):
    from dynrag.corpus import read_passages
    from dynrag.data import demo_passages_path, load_demo_questions
    from dynrag.methods.prompting import PromptBuilder
    from dynrag.methods.registry import build_method
    from dynrag.retrieval.bm25 import BM25Index

    BM25Index.build(read_passages(demo_passages_path()), tmp_path / "index", progress=False)
    # a threshold below every score: the step retrieves
    options = {"max_new_tokens": 32, "samples": 3, "max_steps": 1, "max_step_tokens": 16, "threshold": -1e9}
    method = build_method("seakr", smollm2, BM25Index.load(tmp_path / "index"), options,
                          PromptBuilder.for_dataset("default"))
    answer = method.answer(load_demo_questions()[0].question)
    assert answer.trace.retrievals and answer.final_answer.strip()
    step = answer.to_dict()["steps"][0]
    assert step["details"]["samples"] == 3 and step["details"]["hidden_size"] == 576
