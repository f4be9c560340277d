"""Attention read from llama.cpp's graph (lm/llama_graph_attention.py): the row arithmetic against
hand-computed softmaxes, then a tiny Llama written as a GGUF file here, whose rows from llama.cpp
match what transformers computes with the same weights, while decoding, after a reused prefix and in
a separate pass; and the one-line refusals when the graph is not as expected."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dynrag.errors import ConfigError, DynragError
from dynrag.lm.llama_graph_attention import GraphAttention, misplaced, rows_of, shape_problem, square
from tests.tiny_models import WORDS, tiny_llama


def softmax_rows(scores: np.ndarray, visible: np.ndarray) -> np.ndarray:
    z = np.where(visible, scores, -np.inf)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_rows_are_the_mean_over_heads_cut_to_each_tokens_position():
    # two tokens at positions 1 and 2 of a cache padded to 4 cells, two heads
    scores = np.array([[[0.0, 1.0, 9.0, 9.0], [2.0, 0.0, 1.0, 9.0]],
                       [[1.0, 1.0, 9.0, 9.0], [0.0, 0.0, 3.0, 9.0]]])
    visible = np.arange(4)[None, :] <= np.array([1, 2])[:, None]
    probs = softmax_rows(scores, visible[None])
    rows = rows_of(probs.astype(np.float32), [1, 2])
    e = np.exp
    first = ((e(0) / (e(0) + e(1)) + 0.5) / 2, (e(1) / (e(0) + e(1)) + 0.5) / 2)
    second_head0 = np.array([e(2), e(0), e(1)]) / (e(2) + e(0) + e(1))
    second_head1 = np.array([e(0), e(0), e(3)]) / (2 * e(0) + e(3))
    np.testing.assert_allclose(rows[0], first, atol=1e-6)
    np.testing.assert_allclose(rows[1], (second_head0 + second_head1) / 2, atol=1e-6)
    assert [len(r) for r in rows] == [2, 3] and all(abs(r.sum() - 1) < 1e-6 for r in rows)
    per_head = rows_of(probs.astype(np.float32), [1, 2], per_head=True)
    assert per_head[1].shape == (2, 3)
    np.testing.assert_allclose(per_head[1][1], second_head1, atol=1e-6)


def test_cells_out_of_position_order_are_found():
    in_order = np.array([[True, True, False, False], [True, True, True, False]])
    assert misplaced(in_order, [1, 2]) is None
    assert misplaced(in_order, [0, 2]) == 0  # token at 0 sees a second cell
    swapped = np.array([[True, False, True, False]])
    assert misplaced(swapped, [1]) == 0


def test_a_shape_other_than_cells_tokens_heads_is_named_in_one_line():
    assert shape_problem("kq_soft_max-2", [256, 3, 4, 1], 4) is None
    problem = shape_problem("kq_soft_max-2", [4, 3, 256, 1], 4)
    assert problem and "kq_soft_max-2" in problem and "\n" not in problem and "[n_kv, n_tokens, 4, 1]" in problem


def test_square_pads_rows_and_drops_the_bos():
    rows = [np.array([1.0]), np.array([0.25, 0.75]), np.array([0.1, 0.2, 0.7])]
    matrix = square(rows, skip=1)
    np.testing.assert_allclose(matrix, [[0.75, 0.0], [0.2, 0.7]])
    heads = square([np.ones((2, 1)), np.full((2, 2), 0.5)], skip=0, per_head=True, n_head=2)
    assert heads.shape == (2, 2, 2) and heads[1, 1, 0] == 0.5


# -- a tiny GGUF model -------------------------------------------------------------------------

# SentencePiece-style vocabulary: specials, every byte (text tokenizes into these) and some words.
TOKENS = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["▁" + w for w in WORDS]
TOKEN_TYPES = [2, 3, 3] + [6] * 256 + [1] * len(WORDS)  # unknown, control, byte, normal


def rope_pairs(weight: np.ndarray, heads: int) -> np.ndarray:
    """Q/K rows reordered from transformers' rotate-half layout to the adjacent pairs that
    llama.cpp's llama graph rotates."""
    out, inp = weight.shape
    return weight.reshape(heads, 2, out // heads // 2, inp).swapaxes(1, 2).reshape(out, inp)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(transformers model, GGUF path) with the same float32 weights; queries and keys scaled up so
    that attention is far from uniform and a wrong row would show."""
    gguf = pytest.importorskip("gguf", reason="the gguf package writes the tiny model")
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make test builds it)")
    model = tiny_llama(len(TOKENS), seed=3, attn="eager")
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(15)
            layer.self_attn.k_proj.weight.mul_(15)
    config = model.config
    weights = {k: v.float().numpy() for k, v in model.state_dict().items()}
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(8192)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
    writer.add_rope_freq_base(float(config.rope_parameters["rope_theta"]))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_file_type(0)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(TOKENS)
    writer.add_token_scores([0.0] * len(TOKENS))
    writer.add_token_types(TOKEN_TYPES)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_tensor("token_embd.weight", weights["model.embed_tokens.weight"])
    for i in range(config.num_hidden_layers):
        layer = f"model.layers.{i}."
        q, k = weights[layer + "self_attn.q_proj.weight"], weights[layer + "self_attn.k_proj.weight"]
        for name, value in (("attn_norm", weights[layer + "input_layernorm.weight"]),
                            ("attn_q", rope_pairs(q, config.num_attention_heads)),
                            ("attn_k", rope_pairs(k, config.num_key_value_heads)),
                            ("attn_v", weights[layer + "self_attn.v_proj.weight"]),
                            ("attn_output", weights[layer + "self_attn.o_proj.weight"]),
                            ("ffn_norm", weights[layer + "post_attention_layernorm.weight"]),
                            ("ffn_gate", weights[layer + "mlp.gate_proj.weight"]),
                            ("ffn_up", weights[layer + "mlp.up_proj.weight"]),
                            ("ffn_down", weights[layer + "mlp.down_proj.weight"])):
            writer.add_tensor(f"blk.{i}.{name}.weight", value)
    writer.add_tensor("output_norm.weight", weights["model.norm.weight"])
    writer.add_tensor("output.weight", weights["lm_head.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return model, path


@pytest.fixture(scope="module")
def tiny_lm(tiny):
    from dynrag.lm import load_lm

    _, path = tiny
    return load_lm(f"hf:{path.parent}#{path.name}?backend=llama.cpp", progress=False)


def reference(model, ids: list[int], per_head: bool = False) -> np.ndarray:
    """transformers' last-layer attention over ``ids``: (T, T), or (heads, T, T)."""
    with torch.no_grad():
        attention = model(torch.tensor([ids]), output_attentions=True).attentions[-1][0].float().numpy()
    return attention if per_head else attention.mean(axis=0)


# The weights are float32 in both; llama.cpp keeps keys and values in float16.
TOLERANCE = 5e-3
PROMPT = "the river town had a bridge built by the engineer"


def assert_rows_match(model, gen) -> None:
    ids = gen.prompt_token_ids + gen.token_ids
    expected = reference(model, ids)
    p = gen.prompt_length
    assert len(gen.attention) == len(gen.token_ids) > 0
    for k, row in enumerate(gen.attention):
        assert row.shape == (p + k + 1,)
        assert abs(float(row.sum()) - 1) < 1e-4
        np.testing.assert_allclose(row, expected[p + k, : p + k + 1], atol=TOLERANCE)


def test_decoded_rows_are_the_softmax_transformers_computes_with_the_same_weights(tiny, tiny_lm):
    model, _ = tiny
    assert tiny_lm.capabilities.attention and tiny_lm.capabilities.attention_pass
    gen = tiny_lm.generate(PROMPT, 6, capture_attention=True)
    assert_rows_match(model, gen)
    # the rows are far from uniform (a cell takes ten times its even share), so matching them means something
    assert max(float(row.max()) * len(row) for row in gen.attention) > 10
    # a longer prompt sharing the first one's tokens reuses them from the cache, and its rows still match
    before = tiny_lm.prefill_counts.reused_tokens
    longer = tiny_lm.generate(PROMPT + " in the north", 5, capture_attention=True)
    assert tiny_lm.prefill_counts.reused_tokens > before
    assert_rows_match(model, longer)


def test_plain_decoding_gives_no_rows_and_the_same_tokens(tiny_lm):
    with_rows = tiny_lm.generate(PROMPT, 6, capture_attention=True)
    plain = tiny_lm.generate(PROMPT, 6)
    assert plain.attention is None and plain.token_ids == with_rows.token_ids


def test_a_stop_callback_sees_the_rows_of_every_token_but_the_newest(tiny, tiny_lm):
    seen = []

    def watch(state):
        seen.append((len(state.token_ids), len(state.attention_rows)))
        return len(state.token_ids) == 3

    gen = tiny_lm.generate(PROMPT, 8, capture_attention=True, stop_when=watch)
    assert seen == [(1, 0), (2, 1), (3, 2)]
    assert gen.stop_reason == "callback" and len(gen.attention) == 3
    assert_rows_match(tiny[0], gen)


def test_an_attention_pass_reads_the_tokens_alone_and_keeps_the_decoding_cache(tiny, tiny_lm):
    model, _ = tiny
    first = tiny_lm.generate(PROMPT, 4, capture_attention=True)
    ids = tiny_lm.tokenize(" who was born in the old town")
    np.testing.assert_allclose(tiny_lm.attention_pass(ids, bos=False), reference(model, ids), atol=TOLERANCE)
    with_bos = tiny_lm.attention_pass(ids)  # the BOS goes in front and is dropped from the result
    np.testing.assert_allclose(with_bos, reference(model, [1, *ids])[1:, 1:], atol=TOLERANCE)
    heads = tiny_lm.attention_pass(ids, per_head=True, bos=False)
    assert heads.shape == (model.config.num_attention_heads, len(ids), len(ids))
    np.testing.assert_allclose(heads, reference(model, ids, per_head=True), atol=TOLERANCE)
    long = ids * 40  # more tokens than the scratch context first held
    np.testing.assert_allclose(tiny_lm.attention_pass(long, bos=False)[-3:], reference(model, long)[-3:], atol=TOLERANCE)
    reused = tiny_lm.prefill_counts.reused_tokens
    again = tiny_lm.generate(PROMPT, 4, capture_attention=True)
    assert tiny_lm.prefill_counts.reused_tokens - reused == len(again.prompt_token_ids) - 1
    assert again.token_ids == first.token_ids


def test_a_graph_without_the_tensor_or_with_another_shape_is_refused_in_one_line(tiny_lm):
    from dynrag.lm.llama_graph_attention import LlamaGraphReader

    layers, heads = 3, tiny_lm.graph.graph.n_head
    reader = LlamaGraphReader(tiny_lm.llama, GraphAttention(n_layer=layers + 5, n_head=heads))  # no such layer
    with pytest.raises(DynragError, match="kq_soft_max-7: 0 attention rows for 2 tokens") as info:
        reader.check()
    assert "\n" not in str(info.value)
    reader = LlamaGraphReader(tiny_lm.llama, GraphAttention(n_layer=layers, n_head=heads + 1))
    with pytest.raises(DynragError, match=r"kq_soft_max-2: shape \[\d+, 2, 4, 1\], not") as info:
        reader.check()
    assert "\n" not in str(info.value)


def test_a_model_whose_graph_is_refused_still_decodes_and_refuses_attention_in_one_line(tiny, monkeypatch):
    import dynrag.lm.llama_cpp as backend
    from dynrag.lm import load_lm

    def refuse(self):
        raise DynragError(f"llama.cpp tensor {self.graph.name}: 0 attention rows for 2 tokens evaluated")

    monkeypatch.setattr(backend.LlamaGraphReader, "check", refuse)
    _, path = tiny
    lm = load_lm(f"hf:{path.parent}#{path.name}?backend=llama.cpp", progress=False)
    assert not lm.capabilities.attention and not lm.capabilities.attention_pass
    assert len(lm.generate(PROMPT, 3)) > 0
    for call in (lambda: lm.generate(PROMPT, 3, capture_attention=True), lambda: lm.attention_pass([5, 6])):
        with pytest.raises(ConfigError, match="kq_soft_max-2") as info:
            call()
        assert "\n" not in str(info.value)
