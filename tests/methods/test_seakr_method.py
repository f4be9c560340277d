"""SeaKR end to end on a tiny random Llama: hidden states sampled from the real backend, the
trigger at both ends of the threshold, the refusal on backends without hidden states, and
`dynrag ask --method seakr` run as a user runs it."""

import json

import numpy as np
import pytest
import torch

from dynrag.errors import ConfigError
from dynrag.lm.base import Capabilities, Prompt
from dynrag.lm.hidden import middle_block
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.registry import build_method, method_traits, parse_options
from dynrag.retrieval.base import Hit
from tests.cli_inprocess import run_in_process
from tests.fakes import FakeRetriever
from tests.lm.test_capabilities import TextOnly
from tests.tiny_models import save_tiny_llama, tiny_llama_lm

HITS = [Hit(f"p{i}", f"town {i}", f"the bridge of town {i} was built by the engineer from lyon in {1880 + i} .", 1.0)
        for i in range(4)]
QUESTION = "who built the bridge of town 1 ?"


@pytest.fixture(scope="module")
def lm():
    return tiny_llama_lm(seed=3)


def seakr(lm, **options):
    values = {"max_new_tokens": 16, "samples": 4, "max_step_tokens": 8, **options}
    return build_method("seakr", lm, FakeRetriever(HITS), values, PromptBuilder.for_dataset("default", 2))


@pytest.mark.parametrize("representation", ["ffn", "residual"])
def test_each_sample_gives_one_state_of_the_hidden_size_read_at_an_eos_after_it(lm, representation):
    samples = lm.sample_hidden_states("the river of the town", 5, None, 6, stop=(". ",), representation=representation,
                                      temperature=1.0, top_k=50, top_p=0.9, seed=7)
    assert samples.states.shape == (5, lm.model.config.hidden_size) and samples.states.dtype == np.float32
    assert len(samples.texts) == len(samples.token_ids) == 5 and all(len(t) <= 6 for t in samples.token_ids)
    again = lm.sample_hidden_states("the river of the town", 5, None, 6, stop=(". ",), representation=representation,
                                    temperature=1.0, top_k=50, top_p=0.9, seed=7)
    assert np.array_equal(again.states, samples.states)  # the seed fixes the draw
    # Each row's state is the one a fresh pass over prompt + its tokens + EOS gives at the EOS.
    prompt_ids, _ = lm.encode_prompt(Prompt.of("the river of the town"))
    block = middle_block(lm.model)
    for ids, state in zip(samples.token_ids, samples.states):
        tensor = torch.tensor([[*prompt_ids, *ids, lm.tokenizer.eos_token_id]])
        with torch.inference_mode():
            if representation == "residual":
                want = lm.model(input_ids=tensor, output_hidden_states=True).hidden_states[block + 1][0, -1]
            else:
                seen = []
                hook = lm.model.model.layers[block].mlp.register_forward_hook(lambda m, a, out: seen.append(out[0, -1]))
                lm.model(input_ids=tensor)
                hook.remove()
                want = seen[0]
        assert np.abs(want.numpy() - state).max() < 1e-4


def test_a_layer_past_the_last_block_is_refused(lm):
    with pytest.raises(ConfigError, match=r"layer=9: this model has decoder blocks 0\.\.2"):
        lm.sample_hidden_states("the river", 2, 9, 4)


def test_a_threshold_below_every_score_retrieves_and_a_huge_one_never_does(lm):
    eager = seakr(lm, threshold=-1e6).answer(QUESTION).to_dict()
    assert eager["retrievals"] and eager["retrievals"][0]["query"].strip()
    tentative = [s for s in eager["steps"] if s["kind"] == "tentative"]
    assert tentative and tentative[0]["details"]["decision"] == "retrieve"
    assert all(s["details"]["hidden_size"] == 64 and s["details"]["samples"] == 4 for s in tentative)
    # Every new passage was tried and the least uncertain one chosen: its step is kept.
    chosen = [s for s in eager["steps"] if s["details"].get("decision") == "chosen"]
    candidates = [s for s in eager["steps"] if s["kind"] == "candidate"]
    assert len(chosen) == len(eager["retrievals"]) and len(candidates) == 2 * len(chosen)
    assert all(c["details"]["uncertainty"] is None or c["details"]["uncertainty"] >= chosen[0]["details"]["uncertainty"]
               for c in candidates[:2])
    never = seakr(lm, threshold=1e6).answer(QUESTION).to_dict()
    assert never["retrievals"] == []
    kept = [s for s in never["steps"] if s["kind"] == "generate"]
    assert kept and all(isinstance(s["details"]["uncertainty"], float) and s["details"]["decision"] == "keep" for s in kept)
    # Self-aware reasoning: two readings, one chosen, and the answer is that reading's.
    (choice,) = [s for s in never["steps"] if s["kind"] == "choose"]
    assert choice["details"]["strategy"] in ("rationales", "documents")
    assert never["final_answer"] == choice["details"][f"{choice['details']['strategy']}_answer"]


def test_the_reference_variant_cuts_its_query_to_64_tokens_and_retrieves_too(lm):
    answer = seakr(lm, threshold=-1e6, variant="reference").answer(QUESTION).to_dict()
    assert answer["options"]["max_query_tokens"] == 64 and answer["retrievals"]
    assert parse_options("seakr", {}).max_query_tokens is None


def test_backends_without_hidden_states_are_refused_in_one_line():
    assert method_traits("seakr").needs_hidden_states and not method_traits("seakr").runs_on(TextOnly.capabilities)
    with pytest.raises(ConfigError, match=r"method 'seakr' needs the hidden states .*openai:http.*"
                       r"on transformers or backend=llama\.cpp") as e:
        build_method("seakr", TextOnly(), FakeRetriever(HITS))
    assert "\n" not in str(e.value)

    class AttentionOnly(TextOnly):  # a backend with attention but no hidden states
        name = "hf:model"
        capabilities = Capabilities(attention=True, logprobs=True, attention_pass=True)

    with pytest.raises(ConfigError, match=r"method 'seakr' needs the hidden states .*'hf:model'"):
        build_method("seakr", AttentionOnly(), FakeRetriever(HITS))
    with pytest.raises(ConfigError, match="hidden states"):
        TextOnly().sample_hidden_states("p", 2, None, 4)


def test_dynrag_ask_method_seakr(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "bridge.md").write_text("the old bridge of the town was built in 1887 by an engineer\n")
    (folder / "river.md").write_text("the river rhone flows south through lyon\n")
    r = run_in_process("index", str(folder), "--out", str(tmp_path / "idx"))
    assert r.returncode == 0, r.stderr
    model = save_tiny_llama(tmp_path / "tiny")
    r = run_in_process("ask", "who built the bridge ?", "--corpus", str(tmp_path / "idx"), "--model", f"hf:{model}",
                       "--method", "seakr", "--option", "samples=3", "--option", "max_new_tokens=6",
                       "--option", "threshold=-1000000", "--json")
    assert r.returncode == 0, r.stderr
    trace = json.loads(r.stdout)
    assert trace["method"] == "seakr" and trace["retrievals"]
    assert any(isinstance(s["details"].get("uncertainty"), float) for s in trace["steps"])


def test_tune_has_a_default_space_for_the_threshold():
    from dynrag.tune.space import parse_param

    (spec,) = method_traits("seakr").tune_space
    param = parse_param(spec, parse_options("seakr", {}).__class__, None, "seakr", None)
    assert param.name == "threshold" and param.kind == "float" and param.low < -6.0 < param.high
