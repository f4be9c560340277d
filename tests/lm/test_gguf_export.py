"""A fine-tuned HF directory written back as GGUF: the rotary reordering against hand-worked rows,
a tiny two-tensor export read back, the errors, and (slow) the bundled models' round trip (GGUF ->
HF -> GGUF within 8-bit error of every tensor) and a trained checkpoint answering on llama.cpp."""

import json
import shutil

import numpy as np
import pytest

from dynrag.errors import ConfigError, DynragError
from dynrag.lm.gguf_export import (
    EXPORTED_FILE,
    block_role,
    export_gguf,
    gguf_tensor_name,
    rope_interleave,
    storage_type,
)
from dynrag.lm.lineage import CHECKPOINT_META

gguf = pytest.importorskip("gguf")


def test_rotary_halves_become_interleaved_pairs_per_head():
    one_head = np.arange(4, dtype=np.float32).reshape(4, 1)
    assert rope_interleave(one_head, 1)[:, 0].tolist() == [0, 2, 1, 3]
    two_heads = np.arange(8, dtype=np.float32).reshape(8, 1)
    assert rope_interleave(two_heads, 2)[:, 0].tolist() == [0, 2, 1, 3, 4, 6, 5, 7]
    matrix = np.arange(8, dtype=np.float32).reshape(4, 2)  # whole rows move, columns stay
    assert rope_interleave(matrix, 1).tolist() == [[0, 1], [4, 5], [2, 3], [6, 7]]


def test_names_roles_and_storage():
    assert gguf_tensor_name("model.layers.3.self_attn.q_proj.weight", "qwen2", 24) == "blk.3.attn_q.weight"
    assert gguf_tensor_name("model.layers.0.self_attn.k_proj.bias", "qwen2", 24) == "blk.0.attn_k.bias"
    assert gguf_tensor_name("model.embed_tokens.weight", "llama", 30) == "token_embd.weight"
    assert gguf_tensor_name("model.norm.weight", "llama", 30) == "output_norm.weight"
    assert block_role("blk.3.attn_q.weight") == "attn_q"
    assert block_role("blk.3.attn_q.bias") is None and block_role("token_embd.weight") is None
    Q = gguf.GGMLQuantizationType
    assert storage_type((896,)) == Q.F32
    assert storage_type((128, 64)) == Q.Q8_0 and storage_type((128, 40)) == Q.F16
    with pytest.raises(DynragError, match="'nosucharch'"):
        gguf_tensor_name("model.norm.weight", "nosucharch", 1)


def tiny_base(path, arch="llama"):
    """A GGUF 'base' with one block's query rows and an output norm: enough to export against."""
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(1)
    writer.add_head_count(1)
    writer.add_head_count_kv(1)
    writer.add_string("tokenizer.ggml.model", "kept as it was")
    writer.add_tensor("blk.0.attn_q.weight", np.zeros((4, 32), dtype=np.float32))
    writer.add_tensor("output_norm.weight", np.zeros(32, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def tiny_checkpoint(directory, query):
    from safetensors.numpy import save_file

    directory.mkdir()
    save_file({"model.layers.0.self_attn.q_proj.weight": query,
               "model.norm.weight": np.full(32, 0.5, dtype=np.float32),
               "lm_head.weight": np.zeros((2, 32), dtype=np.float32)},  # not in the base: left out
              str(directory / "model.safetensors"))
    return directory


def test_a_tiny_checkpoint_exports_over_its_base(tmp_path):
    from gguf.quants import dequantize

    base = tiny_base(tmp_path / "base.gguf")
    query = np.arange(128, dtype=np.float32).reshape(4, 32) / 128
    path = export_gguf(tiny_checkpoint(tmp_path / "ckpt", query), base, tmp_path / "out")
    assert path == tmp_path / "out" / EXPORTED_FILE
    reader = gguf.GGUFReader(str(path))
    tensors = {t.name: t for t in reader.tensors}
    assert set(tensors) == {"blk.0.attn_q.weight", "output_norm.weight"}
    assert tensors["blk.0.attn_q.weight"].tensor_type == gguf.GGMLQuantizationType.Q8_0
    written = dequantize(tensors["blk.0.attn_q.weight"].data, gguf.GGMLQuantizationType.Q8_0).reshape(4, 32)
    # one query head of four rows: its rotary halves (rows 0-1, 2-3) interleave
    assert np.allclose(written, query[[0, 2, 1, 3]], atol=1 / 127)
    assert np.array_equal(tensors["output_norm.weight"].data, np.full(32, 0.5, dtype=np.float32))
    assert str(reader.fields["tokenizer.ggml.model"].contents()) == "kept as it was"
    assert int(reader.fields["general.file_type"].contents()) == int(gguf.LlamaFileType.MOSTLY_Q8_0)


def test_a_checkpoint_that_does_not_fit_its_base_is_refused_by_name(tmp_path):
    base = tiny_base(tmp_path / "base.gguf")
    wrong = tiny_checkpoint(tmp_path / "ckpt", np.zeros((4, 64), dtype=np.float32))
    with pytest.raises(DynragError, match=r"'blk.0.attn_q.weight' is \(4, 64\)"):
        export_gguf(wrong, base, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    other = tiny_base(tmp_path / "other.gguf", arch="gemma3")
    with pytest.raises(DynragError, match="'gemma3' model; exportable: llama, qwen2"):
        export_gguf(wrong, other, tmp_path / "out")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["smollm2", "qwen2.5-0.5b"])
def test_bundled_models_round_trip_within_eight_bit_error(tmp_path, name):
    from gguf.quants import dequantize

    from dynrag.lm.bundled import ensure_converted, gguf_path, resolve_bundled

    model = resolve_bundled(name)
    path = export_gguf(ensure_converted(model, progress=False), gguf_path(model), tmp_path / "out")
    base = {t.name: t for t in gguf.GGUFReader(str(gguf_path(model))).tensors}
    exported = gguf.GGUFReader(str(path)).tensors
    assert {t.name for t in exported} == set(base)
    for tensor in exported:
        want = dequantize(base[tensor.name].data, base[tensor.name].tensor_type)
        got = dequantize(tensor.data, tensor.tensor_type)
        # a wrong row order (the rotary halves) would be off by the weights' own size
        assert np.abs(want - got).max() <= 0.01 * np.abs(want).max(), tensor.name


@pytest.mark.slow
def test_a_trained_checkpoint_runs_on_llama_cpp(tmp_path, monkeypatch):
    from dynrag.lm import load_lm
    from dynrag.lm.bundled import ensure_converted, resolve_bundled

    source = ensure_converted(resolve_bundled("smollm2"), progress=False)
    checkpoint = tmp_path / "ckpt"
    shutil.copytree(source, checkpoint)  # stands in for `dynrag train`'s output: same files, its metadata
    (checkpoint / CHECKPOINT_META).write_text(json.dumps({"base_model": "bundled:smollm2"}), encoding="utf-8")
    monkeypatch.setenv("DYNRAG_CACHE_DIR", str(tmp_path / "cache"))
    lm = load_lm(f"hf:{checkpoint}?backend=llama.cpp", progress=False)
    scores = lm.next_token_logprobs("Question: What is the capital of France?\nAnswer: The capital of France is",
                                    [" Paris", " Berlin"])
    assert scores[0] > scores[1]
    assert len(list((tmp_path / "cache" / "models").glob("gguf-export-ckpt-*/model.gguf"))) == 1
    plain = tmp_path / "plain"
    shutil.copytree(source, plain)  # no metadata: nothing says which GGUF lends the tokenizer
    with pytest.raises(ConfigError, match="needs a GGUF file"):
        load_lm(f"hf:{plain}?backend=llama.cpp", progress=False)


def test_llama_cpp_on_a_directory_is_checked_before_anything_is_written(tmp_path):
    from dynrag.lm.loader import bundled_base, check_model_spec
    from dynrag.lm.spec import ModelSpec

    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "config.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ConfigError, match="needs a GGUF file .* a checkpoint `dynrag train` made from a bundled model"):
        check_model_spec(f"hf:{plain}?backend=llama.cpp")
    assert check_model_spec(f"hf:{plain}") == f"hf:{plain}"  # transformers reads it as it is
    stage_one, stage_two = tmp_path / "imi", tmp_path / "coc"
    for directory, parent in ((stage_one, "bundled:smollm2"), (stage_two, f"hf:{stage_one}?backend=llama.cpp")):
        directory.mkdir()
        (directory / "config.json").write_text("{}", encoding="utf-8")
        (directory / CHECKPOINT_META).write_text(json.dumps({"base_model": parent}), encoding="utf-8")
    assert bundled_base(ModelSpec.parse(f"hf:{stage_two}?backend=llama.cpp")).name == "smollm2"
    assert check_model_spec(f"hf:{stage_two}?backend=llama.cpp")
