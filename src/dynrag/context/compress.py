"""Compression: keep only the sentences of the retrieved passages that are worth the prompt space.

- `none`: passages go into the prompt whole.
- `extractive` (query-based, in the spirit of Recomp's extractive compressor, the paper's choice):
  every sentence of every passage is scored by the cosine between its embedding and the
  question's; sentences are taken best first while the total stays within a word budget (the best
  sentence is always kept, even alone over budget; one that does not fit is skipped and smaller
  ones after it may still fit).
- `selective` (Selective Context, query-free): the model reads all passages in one forward pass;
  a sentence's self-information is the mean of -log p(token | everything before it) over its
  tokens. Sentences are taken most informative first until they hold `ratio` of the words. The
  mean (not the original's sum) keeps long sentences from winning just by being long; units are
  whole sentences (the original also offers phrases and tokens) so the text stays readable.

Either way the kept sentences keep their original order inside each passage, passages keep their
order in the list (repacking has already placed them), and a passage left with no sentence is
dropped. Selection is in pure functions (`select_within_budget`, `select_ratio`,
`mean_self_information`); the compressor classes add the model that scores.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from dynrag.errors import ConfigError
from dynrag.lm.base import clip_to_bytes, context_window, require
from dynrag.retrieval.base import Hit
from dynrag.text.sentences import split_sentences



@runtime_checkable
class Compressor(Protocol):
    name: str

    def compress(self, question: str, hits: list[Hit]) -> tuple[list[Hit], dict[str, Any]]:
        """The hits with only their kept text (hits left empty dropped), and what was done, for
        the trace: at least ``words_before`` and ``words_after``."""
        ...


@dataclass(frozen=True)
class Unit:
    """One sentence of one hit."""

    hit: int  # index of the hit in the list
    index: int  # sentence number within the hit
    text: str
    start: int  # char span within the hit's text
    end: int

    @property
    def words(self) -> int:
        return len(self.text.split())


def sentence_units(hits: Sequence[Hit]) -> list[Unit]:
    """Every sentence of every hit, in order, with its char span in the hit's text."""
    units: list[Unit] = []
    for h, hit in enumerate(hits):
        pos = 0
        for i, sentence in enumerate(split_sentences(hit.text)):
            at = hit.text.find(sentence, pos)
            if at < 0:  # cannot happen with split_sentences (it returns substrings); stay safe
                at = pos
            units.append(Unit(h, i, sentence, at, at + len(sentence)))
            pos = at + len(sentence)
    return units


def select_within_budget(scores: Sequence[float], words: Sequence[int], budget: int) -> list[int]:
    """Indices of the units kept: best score first while the word total stays <= budget; the best
    unit is always kept; ties keep the earlier unit. Returned in original order."""
    if budget < 1:
        raise ValueError(f"the word budget must be >= 1 (got {budget})")
    order = sorted(range(len(scores)), key=lambda i: -float(scores[i]))
    kept: list[int] = []
    total = 0
    for i in order:
        if not kept or total + words[i] <= budget:
            kept.append(i)
            total += words[i]
    return sorted(kept)


def select_ratio(scores: Sequence[float], words: Sequence[int], ratio: float) -> list[int]:
    """Indices of the units kept: best score first until the kept units hold at least `ratio` of
    all words (at least one unit); ties keep the earlier unit. Returned in original order."""
    if not 0.0 < ratio <= 1.0:
        raise ValueError(f"the ratio must be in (0, 1] (got {ratio})")
    order = sorted(range(len(scores)), key=lambda i: -float(scores[i]))
    target = ratio * sum(words)
    kept: list[int] = []
    total = 0
    for i in order:
        if kept and total >= target:
            break
        kept.append(i)
        total += words[i]
    return sorted(kept)


def rebuild(hits: Sequence[Hit], units: Sequence[Unit], kept: Sequence[int]) -> list[Hit]:
    """Hits whose text is only their kept sentences (original order, joined by spaces); hits with
    no kept sentence are dropped; the hits' order is kept."""
    by_hit: dict[int, list[Unit]] = {}
    for i in sorted(kept):
        by_hit.setdefault(units[i].hit, []).append(units[i])
    return [
        dataclasses.replace(hit, text=" ".join(u.text for u in sorted(by_hit[h], key=lambda u: u.index)))
        for h, hit in enumerate(hits)
        if h in by_hit
    ]


def mean_self_information(
    offsets: Sequence[tuple[int, int]], logprobs: Sequence[float], spans: Sequence[tuple[int, int]]
) -> np.ndarray:
    """Mean of -log p over the tokens of each char span. A token belongs to the span holding its
    last character; tokens without a log-probability (NaN: the first token) are left out. A span
    with no scored token gets +inf, so it is kept rather than dropped blind."""
    lp = np.asarray(logprobs, dtype=np.float64)
    ends = np.asarray([b - 1 if b > a else -1 for a, b in offsets], dtype=np.int64)
    out = np.full(len(spans), np.inf)
    for j, (start, end) in enumerate(spans):
        inside = (ends >= start) & (ends < end) & ~np.isnan(lp)
        if inside.any():
            out[j] = float(-lp[inside].mean())
    return out


def context_text(hits: Sequence[Hit]) -> tuple[str, list[int]]:
    """The passages as the model reads them ("title: text" lines) and where each hit's text starts."""
    text, starts = "", []
    for hit in hits:
        text += f"{hit.title}: " if hit.title else ""
        starts.append(len(text))
        text += hit.text + "\n"
    return text, starts


def word_count(hits: Sequence[Hit]) -> int:
    return sum(len(h.text.split()) for h in hits)


def _details(kind: str, hits: Sequence[Hit], out: Sequence[Hit], units: Sequence[Unit], kept: Sequence[int], **extra) -> dict[str, Any]:
    kept_ids = {h.id for h in out}
    return {
        "compress": kind,
        "words_before": word_count(hits),
        "words_after": word_count(out),
        "sentences_before": len(units),
        "sentences_after": len(kept),
        "dropped_passages": [h.id for h in hits if h.id not in kept_ids],
        **extra,
    }


class SentenceCompressor:
    """Sentence selection, the shape both compressors share: split the hits into sentences, score
    them (``scores``), keep some (``select``), rebuild the hits; ``settings`` go into the details."""

    name = "sentences"

    def scores(self, question: str, hits: list[Hit], units: list[Unit]) -> Sequence[float]:
        raise NotImplementedError

    def select(self, scores: Sequence[float], words: list[int]) -> list[int]:
        raise NotImplementedError

    def settings(self) -> dict[str, Any]:
        return {}

    def compress(self, question: str, hits: list[Hit]) -> tuple[list[Hit], dict[str, Any]]:
        units = sentence_units(hits)
        if not units:
            return list(hits), _details(self.name, hits, hits, units, [], **self.settings())
        kept = self.select(self.scores(question, hits, units), [u.words for u in units])
        out = rebuild(hits, units, kept)
        return out, _details(self.name, hits, out, units, kept, **self.settings())


class ExtractiveCompressor(SentenceCompressor):
    name = "extractive"

    def __init__(self, embedder, budget: int = 120):
        if budget < 1:
            raise ConfigError(f"compress_budget must be >= 1 word (got {budget})")
        self.embedder, self.budget = embedder, budget

    def scores(self, question: str, hits: list[Hit], units: list[Unit]) -> Sequence[float]:
        vectors = self.embedder.encode([question] + [u.text for u in units])
        return vectors[1:] @ vectors[0]  # the embedder's vectors are L2-normalised: dot = cosine

    def select(self, scores: Sequence[float], words: list[int]) -> list[int]:
        return select_within_budget(scores, words, self.budget)

    def settings(self) -> dict[str, Any]:
        return {"budget": self.budget}


class SelectiveContextCompressor(SentenceCompressor):
    name = "selective"

    def __init__(self, lm, ratio: float = 0.5):
        require(lm, "text_logprobs", needed_by="compress=selective", instead="use compress=extractive")
        if not 0.0 < ratio <= 1.0:
            raise ConfigError(f"compress_ratio must be in (0, 1] (got {ratio})")
        self.lm, self.ratio = lm, ratio

    def scores(self, question: str, hits: list[Hit], units: list[Unit]) -> Sequence[float]:
        text, starts = context_text(hits)
        window = context_window(self.lm)
        if window is not None:
            # One pass must fit the model's window: sentences past it get no score (+inf: kept).
            text = clip_to_bytes(text, window - 16)
        _, offsets, logprobs = self.lm.text_logprobs(text)
        spans = [(starts[u.hit] + u.start, starts[u.hit] + u.end) for u in units]
        return mean_self_information(offsets, logprobs, spans)

    def select(self, scores: Sequence[float], words: list[int]) -> list[int]:
        return select_ratio(scores, words, self.ratio)

    def settings(self) -> dict[str, Any]:
        return {"ratio": self.ratio}
