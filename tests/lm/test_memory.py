"""The memory a model needs, from its config alone (lm/memory.py), against hand-computed values."""

import json

import pytest

from dynrag.errors import ConfigError
from dynrag.lm.loader import load_lm
from dynrag.lm.memory import GB, MemoryNeed, kv_cache_bytes, memory_need, parameter_count, refusal

LLAMA2_7B = {
    "model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000, "hidden_act": "silu",
    "max_position_embeddings": 4096, "tie_word_embeddings": False,
}
LLAMA2_13B = {**LLAMA2_7B, "hidden_size": 5120, "intermediate_size": 13824, "num_hidden_layers": 40,
              "num_attention_heads": 40, "num_key_value_heads": 40}
LLAMA3_8B = {**LLAMA2_7B, "intermediate_size": 14336, "num_key_value_heads": 8, "vocab_size": 128256,
             "max_position_embeddings": 8192}


def test_llama2_7b_parameters_and_bf16_weights():
    # embeddings and head 2 x 32000 x 4096 = 262,144,000; a layer: 4 x 4096^2 + 3 x 4096 x 11008
    # + 2 x 4096 = 202,383,360; x 32 = 6,476,267,520; + the final norm 4096
    assert parameter_count(LLAMA2_7B) == 6_738_415_616
    need = memory_need(LLAMA2_7B, 2)
    assert round(need.weights / GB, 1) == 13.5
    # cache: 2 x 32 layers x 32 heads x 128 x 4096 tokens x 2 bytes = 2,147,483,648
    assert need.cache == 2 * 32 * 32 * 128 * 4096 * 2 == 2_147_483_648


def test_llama2_13b_and_llama3_8b():
    assert parameter_count(LLAMA2_13B) == 13_015_864_320  # the published 13.0B
    assert parameter_count(LLAMA3_8B) == 8_030_261_248  # the published 8.03B
    # grouped-query attention: 8 kv heads, so a quarter of the 7B's cache per token
    assert kv_cache_bytes(LLAMA3_8B, 4096, 2) == 2 * 32 * 8 * 128 * 4096 * 2


def test_tied_embeddings_count_once():
    tied = {**LLAMA2_7B, "tie_word_embeddings": True}
    assert parameter_count(LLAMA2_7B) - parameter_count(tied) == 32000 * 4096


def test_the_safetensors_index_is_the_fallback():
    need = memory_need({"torch_dtype": "bfloat16", "num_hidden_layers": 0}, 4, index_total_size=2_000)
    assert need.weights == 4_000  # 1,000 parameters stored in bf16, loaded in float32


def test_refusal_line():
    need = MemoryNeed(26 * 10**9, 3 * 10**9)
    line = refusal("'hf:meta-llama/Llama-2-13b-chat-hf'", "bfloat16", need, 22 * 10**9, "cuda:0")
    assert line.startswith("'hf:meta-llama/Llama-2-13b-chat-hf' in bfloat16 needs ~26.0 GB + 3.0 GB cache; "
                           "cuda:0 has 22.0 GB free; try device_map=auto")
    assert refusal("x", "float32", need, 30 * 10**9, "cpu") is None


def test_a_model_larger_than_this_machine_is_refused_before_any_weight(tmp_path):
    huge = {**LLAMA2_7B, "hidden_size": 65536, "intermediate_size": 262144, "num_hidden_layers": 400,
            "num_attention_heads": 512, "num_key_value_heads": 512}
    (tmp_path / "config.json").write_text(json.dumps(huge))  # no weights, no tokenizer: never read
    with pytest.raises(ConfigError) as err:
        load_lm(f"hf:{tmp_path}?device=cpu&dtype=bfloat16")
    line = str(err.value)
    assert "\n" not in line and "in bfloat16 needs ~" in line and "this machine's RAM has" in line
