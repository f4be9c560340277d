"""Per-word RIND signals of one generation step, and the sentence each word belongs to."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dynrag.text.words import WordSpan

# words -> the semantic indicator s_i of each (stopword rule or part of speech)
ContentTest = Callable[[Sequence[str]], list[bool]]


@dataclass
class WordScores:
    words: list[WordSpan]
    entropy: np.ndarray
    attention: np.ndarray  # a_max (paper) or sentence-normalised weight (reference)
    content: np.ndarray
    scores: np.ndarray
    sentence: np.ndarray  # sentence index of each word

    @classmethod
    def empty(cls, words: list[WordSpan]) -> "WordScores":
        none = np.zeros(0)
        return cls(words, none, none, np.zeros(0, dtype=bool), none, np.zeros(0, dtype=np.int64))

    def details(self, trigger: int | None) -> dict[str, Any]:
        return {
            "words": [w.text for w in self.words],
            "entropy": _rounded(self.entropy),
            "attention": _rounded(self.attention),
            "score": _rounded(self.scores),
            "content": [bool(c) for c in self.content],
            "trigger": trigger,
        }


def _rounded(values: np.ndarray) -> list[float]:
    return [round(float(v), 4) for v in values]


def sentence_index(words: list[WordSpan]) -> np.ndarray:
    """Sentence number of each word: a word ending in . ? ! closes its sentence."""
    out, current = [], 0
    for w in words:
        out.append(current)
        if w.text.rstrip().endswith((".", "?", "!")):
            current += 1
    return np.asarray(out, dtype=np.int64)
