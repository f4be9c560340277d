"""Model options in a spec (`SPEC?kv_reuse=off&kv_slots=2`): parsed, checked, and applied."""

import numpy as np
import pytest

from dynrag.errors import ConfigError
from dynrag.lm.loader import resolve_model
from dynrag.lm import describe_specs, load_lm
from dynrag.lm.loader import split_options
from tests.tiny_models import tiny_llama, tiny_tokenizer


def test_spec_options_are_split_off_and_typed():
    assert split_options("bundled") == ("bundled", split_options("bundled?")[1])
    base, options = split_options("hf:/models/x#m.gguf?kv_reuse=prefix&kv_slots=2")
    assert base == "hf:/models/x#m.gguf" and options.kv_reuse == "prefix" and options.kv_slots == 2
    assert split_options("bundled")[1].kv_reuse == "recent"  # the default
    assert "kv_reuse=" in describe_specs()


@pytest.mark.parametrize("spec, message", [
    ("bundled?reuse=off", "unknown option 'reuse'; valid options: backend, device, device_map, dtype, kv_reuse, kv_slots, lookup, prompt, revision"),
    ("bundled?kv_reuse=sometimes", "'recent', 'prefix' or 'off'"),
    ("bundled?kv_slots=0", "kv_slots"),
    ("bundled?lookup=-1", "lookup"),
    ("bundled?lookup=many", "lookup"),
    ("bundled?kv_reuse", "expected KEY=VALUE"),
])
def test_bad_spec_options_name_the_spec_and_the_key(spec, message):
    with pytest.raises(ConfigError) as err:
        load_lm(spec)
    assert repr(spec) in str(err.value) and message in str(err.value)


def test_a_model_directory_loads_with_its_options(tmp_path):
    tok = tiny_tokenizer()
    tiny_llama(len(tok)).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    lm = load_lm(f"hf:{tmp_path}?kv_reuse=off&kv_slots=2&lookup=0")
    assert lm.kv_reuse == "off" and lm._kv.slots == 2 and lm.name == f"hf:{tmp_path}"
    assert lm.draft_tokens == 0
    default = load_lm(f"hf:{tmp_path}")
    assert default.kv_reuse == "recent" and default.draft_tokens == 5


def test_an_eval_run_keeps_the_model_options_of_its_spec(tmp_path):
    resolved = resolve_model("bundled?kv_reuse=prefix")
    assert resolved.startswith("bundled:") and resolved.endswith("?kv_reuse=prefix")
    (tmp_path / "config.json").write_text("{}")  # the spec is checked before a run is written
    assert resolve_model(f"hf:{tmp_path}?kv_reuse=off") == f"hf:{tmp_path}?kv_reuse=off"


def test_a_directory_transformers_cannot_load_is_one_line_naming_the_spec(tmp_path):
    from dynrag.errors import DynragError, first_line

    (tmp_path / "config.json").write_text("{}")  # passes the file-system check, not transformers
    spec = f"hf:{tmp_path}"
    with pytest.raises(DynragError) as err:
        load_lm(spec)
    message = str(err.value)
    assert message.startswith(f"cannot load model {spec!r}: ") and "\n" not in message
    assert first_line(ValueError("  first\nsecond  ")) == "first"
    assert first_line(OSError()) == "OSError"


@pytest.mark.parametrize("spec, message", [
    ("bundled?device=gpu", "device 'gpu': choose one of auto, cpu, cuda, cuda:N, mps"),
    ("bundled?dtype=int4", "dtype"),
    ("bundled?device_map=balanced", "device_map"),
])
def test_bad_device_options_name_the_spec_and_the_choices(spec, message):
    with pytest.raises(ConfigError) as err:
        load_lm(spec)
    assert repr(spec) in str(err.value) and message in str(err.value)


def test_device_and_dtype_options_parse():
    _, options = split_options("hf:org/name?device=CUDA:1&dtype=bfloat16&device_map=auto&revision=v2")
    assert (options.device, options.dtype, options.device_map, options.revision) == ("cuda:1", "bfloat16", "auto", "v2")
    assert split_options("bundled")[1].device == "auto" and split_options("bundled")[1].dtype == "auto"


def test_a_model_directory_loads_in_bfloat16_on_the_cpu(tmp_path):
    import torch

    tok = tiny_tokenizer()
    tiny_llama(len(tok)).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    lm = load_lm(f"hf:{tmp_path}?device=cpu&dtype=bfloat16")
    assert lm.model.dtype == torch.bfloat16 and lm.model.device.type == "cpu"
    out = lm.generate("the river", max_new_tokens=4, capture_attention=True)
    assert out.entropies.dtype == np.float32 and np.isfinite(out.entropies).all()
    assert out.attention is not None and all(abs(row.sum() - 1) < 1e-2 for row in out.attention)
    assert load_lm(f"hf:{tmp_path}").model.dtype == torch.float32  # auto on a CPU-only machine
