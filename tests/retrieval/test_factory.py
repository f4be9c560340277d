"""Choosing a retriever by name: option parsing, the preset default and the numpy BM25 default."""

from pathlib import Path

import pytest

from dynrag.errors import ConfigError
from dynrag.methods.chain import ChainOptions, preset_retriever
from dynrag.retrieval.factory import (
    RETRIEVERS, needs_index, open_retriever, option_help, parse_retriever_options, with_numpy_bm25,
)
from dynrag.retrieval.hybrid import DEFAULT_ALPHA


def test_parse_options_names_the_flag_it_came_from():
    with pytest.raises(ConfigError, match=r"--retriever-option: retriever 'bm25': unknown option 'alpha'; valid options: backend"):
        parse_retriever_options("bm25", ["alpha=0.3"], flag="--retriever-option")
    with pytest.raises(ConfigError, match=r"choose one of: bm25, dense, hybrid, milvus"):
        parse_retriever_options("sparse", [])


def test_parse_options_types_values_and_keeps_only_those_given():
    assert parse_retriever_options("hybrid", ["alpha=0.5", "fusion=rrf", "candidates=20"]) == {
        "alpha": 0.5, "fusion": "rrf", "candidates": 20,
    }
    assert parse_retriever_options("milvus", ["mode=bm25", "uri=/tmp/x.db"]) == {"mode": "bm25", "uri": "/tmp/x.db"}
    assert parse_retriever_options("dense", ["batch-size=8"]) == {"batch_size": 8}
    with pytest.raises(ConfigError, match="retriever 'bm25': unknown option 'alpha'"):
        parse_retriever_options("bm25", ["alpha=0.3"])
    with pytest.raises(ConfigError, match=r"retriever 'hybrid': option 'alpha': must be a number \(got 'high'\)"):
        parse_retriever_options("hybrid", ["alpha=high"])
    with pytest.raises(ConfigError, match=r"retriever 'hybrid': option 'fusion'.*'minmax' or 'rrf'"):
        parse_retriever_options("hybrid", ["fusion=mean"])
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_retriever_options("hybrid", ["alpha"])
    with pytest.raises(ConfigError, match="unknown retriever"):
        parse_retriever_options("sparse", [])


def test_the_registry_lists_every_retriever_with_typed_options():
    assert RETRIEVERS.names() == ["bm25", "dense", "hybrid", "milvus", "opensearch"]
    assert RETRIEVERS.parse_options("hybrid", {}).alpha == DEFAULT_ALPHA == 0.3
    help_text = option_help()
    assert "hybrid: " in help_text and "alpha (0.3)" in help_text and "milvus: " in help_text
    with pytest.raises(ConfigError, match="retriever 'bm25' searches an index directory"):
        open_retriever("bm25", None, {}, work_dir=Path("."))
    assert [name for name in RETRIEVERS.names() if not needs_index(name)] == ["opensearch"]  # a search server


def test_preset_retriever_default():
    assert preset_retriever({}) == "bm25"
    assert preset_retriever({"preset": "none"}) == "bm25"
    # the paper's balanced and best configurations both search with Hybrid
    assert preset_retriever({"preset": "balanced"}) == "hybrid"
    assert preset_retriever(ChainOptions(preset="best")) == "hybrid"
    with pytest.raises(ConfigError, match=r"--retriever-option: retriever 'hybrid': option 'alpha'"):
        parse_retriever_options(preset_retriever({"preset": "balanced"}), ["alpha=x"], flag="--retriever-option")


def test_with_numpy_bm25_keeps_a_users_backend():
    assert with_numpy_bm25("bm25", {}) == {"backend": "numpy"}
    assert with_numpy_bm25("bm25", {"backend": "numba"}) == {"backend": "numba"}
    assert with_numpy_bm25("hybrid", {"alpha": 0.5}) == {"bm25_backend": "numpy", "alpha": 0.5}
    assert with_numpy_bm25("dense", {"batch_size": 4}) == {"batch_size": 4}


def test_retriever_traits_live_in_the_entries():
    from dynrag.retrieval.base import RetrieverTraits
    from dynrag.retrieval.factory import retriever_traits

    assert all(isinstance(entry.traits, RetrieverTraits) for entry in RETRIEVERS)
    assert retriever_traits("bm25").bm25_backend_key == "backend"
    assert retriever_traits("hybrid").bm25_backend_key == "bm25_backend"
    assert retriever_traits("dense").bm25_backend_key is None and not retriever_traits("opensearch").needs_index


def test_the_embedding_device_is_a_checked_retriever_option():
    from dynrag.retrieval.factory import EmbeddingOptions

    assert EmbeddingOptions().device == "auto" and EmbeddingOptions(device="CUDA:1").device == "cuda:1"
    with pytest.raises(ValueError, match="choose one of auto, cpu, cuda, cuda:N, mps"):
        EmbeddingOptions(device="tpu")
