"""DRAGIN: RIND decides when to retrieve, QFS decides what to ask (DESIGN §5)."""

from dynrag.methods.dragin.scoring import (
    first_trigger,
    qfs_select,
    reference_attention_weights,
    reference_qfs_weights,
    reference_scores,
    reference_token_weights,
    reference_trigger,
    reference_word_weights,
    rind_scores,
    word_attention,
    word_entropy,
)

__all__ = [
    "first_trigger",
    "qfs_select",
    "reference_attention_weights",
    "reference_qfs_weights",
    "reference_scores",
    "reference_token_weights",
    "reference_trigger",
    "reference_word_weights",
    "rind_scores",
    "word_attention",
    "word_entropy",
]

from dynrag.methods.dragin.method import Dragin, DraginOptions  # noqa: E402  (after the formulas it uses)
