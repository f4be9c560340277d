"""The reranker registry: ``rerank=NAME`` of the retrieval chain, with each reranker's options.

An opener is called as ``opener(options, *, lm, embedder)``: ``lm`` is the answering model and
``embedder()`` returns the shared sentence embedder (loaded on first call), so a reranker that
needs neither loads nothing. Option names are the chain's own (``rerank_model``), so a method's
``--option`` reaches the reranker unchanged. Adding a reranker: its module and one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from dynrag.registry import Options, Registry
from dynrag.rerank.base import Reranker

RERANKERS: Registry[Reranker] = Registry("reranker")


@dataclass(frozen=True)
class RerankerTraits:
    """What a reranker needs, read from its entry before it is opened."""

    uses_answering_model: bool = False  # ranks with the model that answers (the opener's ``lm``)


def reranker_traits(name: str) -> RerankerTraits:
    return RERANKERS.get(name).traits or RerankerTraits()


class LMRerankOptions(Options):
    max_passage_words: int = Field(200, ge=1)


class CrossEncoderOptions(Options):
    rerank_model: str  # a sequence-classification model directory
    rerank_device: str = "auto"  # where it runs: auto, cpu, cuda, cuda:N, mps


@RERANKERS.register("lm", LMRerankOptions, summary="the answering model's P(yes) that a passage helps (pointwise)",
                    traits=RerankerTraits(uses_answering_model=True))
def open_lm(options: LMRerankOptions, *, lm: Any, embedder: Callable[[], Any]) -> Reranker:
    from dynrag.rerank.lm_pointwise import LMPointwiseReranker

    return LMPointwiseReranker(lm, max_passage_words=options.max_passage_words)


@RERANKERS.register("embedding", summary="cosine of question and passage sentence embeddings")
def open_embedding(options: Options, *, lm: Any, embedder: Callable[[], Any]) -> Reranker:
    from dynrag.rerank.embedding import EmbeddingReranker

    return EmbeddingReranker(embedder())


@RERANKERS.register("cross_encoder", CrossEncoderOptions, summary="a cross-encoder model directory (rerank_model=PATH)")
def open_cross_encoder(options: CrossEncoderOptions, *, lm: Any, embedder: Callable[[], Any]) -> Reranker:
    from dynrag.rerank.cross_encoder import CrossEncoderReranker

    return CrossEncoderReranker.load(options.rerank_model, device=options.rerank_device)
