"""RERANKERS: every chain `rerank=` choice, opened with the model and a lazily loaded embedder."""

import pytest

from dynrag.errors import ConfigError
from dynrag.methods.chain import ChainOptions
from dynrag.rerank.embedding import EmbeddingReranker
from dynrag.rerank.registry import RERANKERS, reranker_traits
from tests.fakes import HashEmbedder


def test_the_chain_accepts_exactly_the_registered_rerankers():
    assert RERANKERS.names() == ["lm", "embedding", "cross_encoder"]
    for name in ("none", "lm", "embedding"):
        assert ChainOptions(rerank=name).rerank == name
    with pytest.raises(ValueError, match="unknown reranker 'bm25'; choose one of: none, lm, embedding, cross_encoder"):
        ChainOptions(rerank="bm25")


def test_openers_load_the_embedder_only_when_they_need_it():
    loads = []

    def embedder():
        loads.append(1)
        return HashEmbedder()

    reranker = RERANKERS.open("embedding", {}, lm=None, embedder=embedder)
    assert isinstance(reranker, EmbeddingReranker) and loads == [1]
    with pytest.raises(ConfigError, match="no-such-dir: no such directory"):
        RERANKERS.open("cross_encoder", {"rerank_model": "no-such-dir"}, lm=None, embedder=embedder)
    assert loads == [1]


def test_only_the_lm_reranker_asks_for_the_answering_model():
    assert [name for name in RERANKERS.names() if reranker_traits(name).uses_answering_model] == ["lm"]
    with pytest.raises(ConfigError, match="unknown reranker 'bm25'"):
        reranker_traits("bm25")
