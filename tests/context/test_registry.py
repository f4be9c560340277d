"""COMPRESSORS: every chain `compress=` choice, with its options under the chain's own names."""

import pytest

from dynrag.context.compress import Compressor, ExtractiveCompressor
from dynrag.context.registry import COMPRESSORS
from dynrag.errors import ConfigError
from dynrag.methods.chain import ChainOptions
from tests.fakes import HashEmbedder


def test_the_chain_accepts_exactly_the_registered_compressors():
    assert COMPRESSORS.names() == ["extractive", "selective", "abstractive"]
    with pytest.raises(ValueError, match="unknown compressor 'zip'; choose one of: none, extractive, selective, abstractive"):
        ChainOptions(compress="zip")


def test_open_passes_the_budget_and_checks_it():
    compressor = COMPRESSORS.open("extractive", {"compress_budget": 40}, lm=None, embedder=HashEmbedder)
    assert isinstance(compressor, ExtractiveCompressor) and isinstance(compressor, Compressor)
    assert compressor.budget == 40
    with pytest.raises(ConfigError, match="compressor 'extractive': option 'compress_budget'"):
        COMPRESSORS.open("extractive", {"compress_budget": 0}, lm=None, embedder=HashEmbedder)
