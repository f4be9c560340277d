"""Abstractive compression: the model rewrites the retrieved passages as a few sentences that keep
what bears on the question, and the reader reads those sentences instead of the passages.

The best-practices paper's abstractive compressor (Recomp's) is a model trained for the job; here
the answering model itself writes the summary, prompted in its own style (a chat model inside its
template). The summary becomes one hit whose id lists the passages it came from, so support
scoring still sees which passages were read.
"""

from __future__ import annotations

from typing import Any

from dynrag.context.compress import context_text, word_count
from dynrag.errors import ConfigError
from dynrag.lm.chat import frame_of
from dynrag.retrieval.base import Hit

INSTRUCTION = ("Read the passages and the question. Write at most three short sentences with the facts from the "
               "passages that help answer the question. Do not answer from memory and do not add anything else.")
LABEL = "Facts:"


def summary_prompt(lm: Any, question: str, passages: str) -> str:
    """The prompt asking ``lm`` for the question-focused summary, plain or in its chat frame."""
    body = f"Passages:\n{passages.strip()}\n\nQuestion: {' '.join(question.split())}"
    frame = frame_of(lm)
    if frame is None:
        return f"{INSTRUCTION}\n\n{body}\n{LABEL}"
    return frame.wrap(INSTRUCTION, body, LABEL)


class AbstractiveCompressor:
    name = "abstractive"

    def __init__(self, lm: Any, max_new_tokens: int = 96):
        if lm is None:
            raise ConfigError("compress=abstractive needs a language model to write the summary")
        if max_new_tokens < 1:
            raise ConfigError(f"compress_max_new_tokens must be >= 1 (got {max_new_tokens})")
        self.lm, self.max_new_tokens = lm, max_new_tokens

    def compress(self, question: str, hits: list[Hit]) -> tuple[list[Hit], dict[str, Any]]:
        text, _ = context_text(hits)
        gen = self.lm.generate(summary_prompt(self.lm, question, text), self.max_new_tokens, stop=("\n\n",))
        summary = " ".join(gen.text.split())
        if not summary:  # nothing written: the passages stay as they were rather than vanish
            out = list(hits)
        else:
            out = [Hit("summary:" + "+".join(h.id for h in hits), "Summary", summary, hits[0].score if hits else 0.0)]
        details = {
            "compress": self.name, "words_before": word_count(hits), "words_after": word_count(out),
            "decoded_tokens": gen.decoded_tokens or len(gen), "max_new_tokens": self.max_new_tokens,
            "dropped_passages": [],  # every passage was read to write the summary
        }
        return out, details
