"""Choosing a retriever by name: option parsing, the preset default and the numpy BM25 default."""

import pytest

from dynrag.errors import ConfigError
from dynrag.retrieval.factory import parse_retriever_options, resolve_retriever, with_numpy_bm25


def test_parse_options_names_the_flag_it_came_from():
    with pytest.raises(ConfigError, match=r"--retriever-option alpha: not an option of retriever 'bm25'"):
        parse_retriever_options("bm25", ["alpha=0.3"], flag="--retriever-option")
    with pytest.raises(ConfigError, match=r"choose one of: bm25, dense, hybrid, milvus"):
        parse_retriever_options("sparse", [])


def test_resolve_retriever_default_preset_and_explicit_choice():
    assert resolve_retriever(None, [], {}) == ("bm25", {})
    assert resolve_retriever(None, [], {"preset": "none"}) == ("bm25", {})
    # the paper's balanced and best configurations both search with Hybrid
    assert resolve_retriever(None, [], {"preset": "balanced"}) == ("hybrid", {})
    assert resolve_retriever(None, ["alpha=0.7"], {"preset": "best"}) == ("hybrid", {"alpha": 0.7})
    # an explicit choice wins over the preset's
    assert resolve_retriever("dense", ["batch_size=8"], {"preset": "balanced"}) == ("dense", {"batch_size": 8})
    with pytest.raises(ConfigError, match=r"--retriever-option 'alpha=x': alpha must be a float"):
        resolve_retriever(None, ["alpha=x"], {"preset": "balanced"})


def test_with_numpy_bm25_keeps_a_users_backend():
    assert with_numpy_bm25("bm25", {}) == {"backend": "numpy"}
    assert with_numpy_bm25("bm25", {"backend": "numba"}) == {"backend": "numba"}
    assert with_numpy_bm25("hybrid", {"alpha": 0.5}) == {"bm25_backend": "numpy", "alpha": 0.5}
    assert with_numpy_bm25("dense", {"batch_size": 4}) == {"batch_size": 4}
