"""Rerankers: re-score retrieved passages against the question and keep the best.

- `lm`: the answering model's own probability of "yes" to "is this passage useful for the
  question?" (pointwise, like monoT5; one forward pass per passage);
- `embedding`: cosine between question and passage sentence embeddings (all-MiniLM-L6-v2);
- `cross_encoder`: any transformers sequence-classification model directory the user has.
"""

from dynrag.rerank.base import Reranker, ranked

__all__ = ["Reranker", "ranked"]
