"""LoRA adapters on disk: the delta formula by hand, stacking two adapters into one, the sha256
check, and `--model hf:ADAPTER_DIR` loading as base + adapter."""

from __future__ import annotations

import json

import pytest
import torch

from dynrag.errors import ConfigError, DynragError
from dynrag.lm import load_lm
from dynrag.lm.adapter import (
    ADAPTER_META,
    ADAPTER_WEIGHTS,
    adapter_behind,
    apply_adapter,
    layer_delta,
    layers,
    read_adapter,
    stack,
    write_adapter,
)
from dynrag.lm.loader import check_model_spec
from tests.tiny_models import save_tiny_llama, tiny_llama

torch.set_num_threads(1)


def test_a_layers_delta_is_b_times_a_by_hand():
    a = torch.tensor([[1.0, 2.0], [0.0, 1.0]])  # rank 2, 2 inputs
    b = torch.tensor([[1.0, 0.0], [2.0, 1.0], [0.0, 3.0]])  # 3 outputs
    assert layer_delta(a, b).tolist() == [[1.0, 2.0], [2.0, 5.0], [0.0, 3.0]]
    with pytest.raises(ValueError, match="do not chain"):
        layer_delta(a, torch.ones(3, 3))


def test_stacking_by_hand_adds_the_two_deltas():
    first = {"m.lora_a": torch.tensor([[1.0, 0.0]]), "m.lora_b": torch.tensor([[2.0], [0.0]])}
    second = {"m.lora_a": torch.tensor([[0.0, 1.0]]), "m.lora_b": torch.tensor([[1.0], [1.0]]),
              "n.lora_a": torch.tensor([[1.0]]), "n.lora_b": torch.tensor([[3.0]])}
    both = stack(first, second)
    assert both["m.lora_a"].shape == (2, 2) and both["m.lora_b"].shape == (2, 2)  # rank 1 + 1
    # [[2, 0], [0, 0]] + [[0, 1], [0, 1]]
    assert layer_delta(both["m.lora_a"], both["m.lora_b"]).tolist() == [[2.0, 1.0], [0.0, 1.0]]
    assert both["n.lora_a"].tolist() == [[1.0]] and both["n.lora_b"].tolist() == [[3.0]]  # only the second adapts n


def test_layers_refuse_a_missing_factor_and_a_stray_tensor():
    assert layers({"x.lora_a": torch.ones(1, 2), "x.lora_b": torch.ones(2, 1)}) == ["x"]
    with pytest.raises(ValueError, match="'x' lacks its lora_b"):
        layers({"x.lora_a": torch.ones(1, 2)})
    with pytest.raises(ValueError, match="'x.weight' is not a LoRA factor"):
        layers({"x.weight": torch.ones(1, 2)})


def random_factors(model, rank: int, seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    out = {}
    for name in ("model.layers.0.self_attn.q_proj", "model.layers.1.mlp.down_proj"):
        weight = dict(model.named_modules())[name].weight
        out[name + ".lora_a"] = 0.1 * torch.randn(rank, weight.shape[1], generator=generator)
        out[name + ".lora_b"] = 0.1 * torch.randn(weight.shape[0], rank, generator=generator)
    return out


def test_applying_a_stack_equals_applying_each_adapter_in_turn():
    ids = torch.tensor([[3, 5, 7, 9]])
    one, two = tiny_llama(64, seed=4), tiny_llama(64, seed=4)
    first, second = random_factors(one, 2, seed=1), random_factors(one, 3, seed=2)
    assert apply_adapter(one, first) == 2 and apply_adapter(one, second) == 2
    apply_adapter(two, stack(first, second))
    with torch.no_grad():
        assert torch.allclose(one(input_ids=ids).logits, two(input_ids=ids).logits, atol=1e-5)


def test_an_adapter_for_another_model_is_refused_naming_the_layer():
    model = tiny_llama(64, seed=4)
    with pytest.raises(ConfigError, match="model.layers.9.mlp.up_proj.*no such layer"):
        apply_adapter(model, {"model.layers.9.mlp.up_proj.lora_a": torch.ones(1, 64),
                              "model.layers.9.mlp.up_proj.lora_b": torch.ones(128, 1)})
    with pytest.raises(ConfigError, match="does not fit this model"):
        apply_adapter(model, {"model.layers.0.self_attn.q_proj.lora_a": torch.ones(1, 7),
                              "model.layers.0.self_attn.q_proj.lora_b": torch.ones(64, 1)})


def test_written_adapters_are_read_back_and_a_changed_file_is_refused(tmp_path):
    model = tiny_llama(64, seed=4)
    factors = random_factors(model, 2, seed=1)
    out = write_adapter(tmp_path / "ad", factors, "bundled:smollm2", about={"stage": "test"})
    meta = json.loads((out / ADAPTER_META).read_text())
    assert meta["base"] == "bundled:smollm2" and meta["rank"] == 2 and meta["layers"] == 2 and meta["stage"] == "test"
    adapter = read_adapter(out)
    assert adapter.rank == 2 and adapter.sha256 == meta["weights_sha256"]
    assert all(torch.equal(adapter.factors[k], factors[k].float()) for k in factors)
    with pytest.raises(DynragError, match="does not match the pinned digest"):
        read_adapter(out, expected_sha256="0" * 64)
    weights = out / ADAPTER_WEIGHTS
    weights.write_bytes(weights.read_bytes()[:-1] + b" ")
    with pytest.raises(DynragError, match="does not match adapter.json"):
        read_adapter(out)


@pytest.fixture
def base_and_adapter(tmp_path, monkeypatch):
    monkeypatch.setenv("DYNRAG_CACHE_DIR", str(tmp_path / "cache"))
    base = save_tiny_llama(tmp_path / "base", seed=5)
    factors = random_factors(tiny_llama(64, seed=5), 2, seed=3)
    return base, write_adapter(tmp_path / "adapter", factors, "hf:../base"), factors  # relative to the adapter


def test_hf_adapter_dir_loads_as_its_base_with_the_adapter_added(base_and_adapter):
    base, adapter_dir, factors = base_and_adapter
    assert check_model_spec(f"hf:{adapter_dir}") == f"hf:{adapter_dir}"
    lm = load_lm(f"hf:{adapter_dir}", progress=False)
    expected = load_lm(f"hf:{base}", progress=False).model
    apply_adapter(expected, factors)
    ids = torch.tensor([[1, 4, 6, 8]])
    with torch.no_grad():
        assert torch.allclose(lm.model(input_ids=ids).logits, expected(input_ids=ids).logits, atol=1e-5)
    again = load_lm(f"hf:{adapter_dir}", progress=False)  # from the merged copy in the cache
    with torch.no_grad():
        assert torch.allclose(again.model(input_ids=ids).logits, expected(input_ids=ids).logits, atol=1e-5)
    assert adapter_behind(f"hf:{adapter_dir}").base == f"hf:{base.resolve()}"


def test_an_adapter_whose_base_cannot_load_fails_naming_the_spec(base_and_adapter, tmp_path):
    _, adapter_dir, factors = base_and_adapter
    orphan = write_adapter(tmp_path / "orphan", factors, f"hf:{tmp_path / 'gone'}")
    with pytest.raises(ConfigError, match=f"hf:{orphan}'.*base .*cannot load: .*no such directory {tmp_path / 'gone'}"):
        check_model_spec(f"hf:{orphan}")
    (adapter_dir / ADAPTER_META).write_text(json.dumps({"format": "other/1"}))
    with pytest.raises(ConfigError, match=f"model spec 'hf:{adapter_dir}'.*format 'other/1'"):
        check_model_spec(f"hf:{adapter_dir}")
