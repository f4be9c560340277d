"""The compressor registry: ``compress=NAME`` of the retrieval chain, with each one's options.

Openers are called as ``opener(options, *, lm, embedder)`` like the rerankers' (rerank/registry.py);
option names are the chain's own (``compress_budget``, ``compress_ratio``). Adding a compressor:
a class with ``compress(question, hits)`` (the ``Compressor`` protocol) and one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import Field

from dynrag.context.compress import Compressor
from dynrag.registry import Options, Registry

COMPRESSORS: Registry[Compressor] = Registry("compressor")


class ExtractiveOptions(Options):
    compress_budget: int = Field(150, ge=1)  # words kept over all passages


class SelectiveOptions(Options):
    compress_ratio: float = Field(0.5, gt=0.0, le=1.0)  # share of the words kept


@COMPRESSORS.register("extractive", ExtractiveOptions, summary="sentences most similar to the question, within a word budget")
def open_extractive(options: ExtractiveOptions, *, lm: Any, embedder: Callable[[], Any]) -> Compressor:
    from dynrag.context.compress import ExtractiveCompressor

    return ExtractiveCompressor(embedder(), options.compress_budget)


@COMPRESSORS.register("selective", SelectiveOptions, summary="selective context: the most self-informative sentences")
def open_selective(options: SelectiveOptions, *, lm: Any, embedder: Callable[[], Any]) -> Compressor:
    from dynrag.context.compress import SelectiveContextCompressor

    return SelectiveContextCompressor(lm, options.compress_ratio)


class AbstractiveOptions(Options):
    compress_max_new_tokens: int = Field(96, ge=1)  # the summary's length cap, in tokens


@COMPRESSORS.register("abstractive", AbstractiveOptions, summary="the answering model rewrites the passages as a short question-focused summary")
def open_abstractive(options: AbstractiveOptions, *, lm: Any, embedder: Callable[[], Any]) -> Compressor:
    from dynrag.context.abstractive import AbstractiveCompressor

    return AbstractiveCompressor(lm, options.compress_max_new_tokens)
