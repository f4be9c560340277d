"""Choosing a retriever by name: option parsing, the preset default and the numpy BM25 default."""

import pytest

from dynrag.errors import ConfigError
from dynrag.methods.chain import ChainOptions, preset_retriever
from dynrag.retrieval.factory import parse_retriever_options, with_numpy_bm25


def test_parse_options_names_the_flag_it_came_from():
    with pytest.raises(ConfigError, match=r"--retriever-option alpha: not an option of retriever 'bm25'"):
        parse_retriever_options("bm25", ["alpha=0.3"], flag="--retriever-option")
    with pytest.raises(ConfigError, match=r"choose one of: bm25, dense, hybrid, milvus"):
        parse_retriever_options("sparse", [])


def test_preset_retriever_default():
    assert preset_retriever({}) == "bm25"
    assert preset_retriever({"preset": "none"}) == "bm25"
    # the paper's balanced and best configurations both search with Hybrid
    assert preset_retriever({"preset": "balanced"}) == "hybrid"
    assert preset_retriever(ChainOptions(preset="best")) == "hybrid"
    with pytest.raises(ConfigError, match=r"--retriever-option 'alpha=x': alpha must be a float"):
        parse_retriever_options(preset_retriever({"preset": "balanced"}), ["alpha=x"], flag="--retriever-option")


def test_with_numpy_bm25_keeps_a_users_backend():
    assert with_numpy_bm25("bm25", {}) == {"backend": "numpy"}
    assert with_numpy_bm25("bm25", {"backend": "numba"}) == {"backend": "numba"}
    assert with_numpy_bm25("hybrid", {"alpha": 0.5}) == {"bm25_backend": "numpy", "alpha": 0.5}
    assert with_numpy_bm25("dense", {"batch_size": 4}) == {"batch_size": 4}
