"""ETC, the entropy-trend constraint (Li et al., AAAI 2026): retrieve when uncertainty starts to
rise sharply, read from the second difference of the generated words' entropy (``trend.py``).

The loop is DRAGIN's (``paper`` variant): decode a chunk, score its words, cut the answer before the
first word over ``theta``, search, continue from the cut with the new documents, and keep the next
sentence unchecked. The score needs only each token's entropy, which every backend records, so ETC
runs on transformers, llama.cpp and an OpenAI-compatible server alike; ``weight=attention`` adds the
authors' attention factor (a backend that captures attention), ``documents=sentence`` their
one-sentence use of the documents.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from dynrag.lm.base import Generation, require
from dynrag.methods.base import Answer, MethodTraits
from dynrag.methods.dragin.scoring import word_attention
from dynrag.methods.dragin.wordscores import ContentTest, sentence_index
from dynrag.methods.etc.trend import attention_focus, entropy_trend, per_sentence, trend_trigger, word_max
from dynrag.methods.iterative import SENTENCE_ENDS, IterativeMethod, IterativeOptions, LoopState
from dynrag.methods.query_forms import query_of
from dynrag.text.content import content_flags, spacy_tagger
from dynrag.text.words import WordSpan, merge_words

# What `dynrag tune --method etc` searches when no --space is given (docs/methods.md, "etc"): the threshold on the
# smoothed second difference, in nats.
TUNE_SPACE = ("theta=0.2:3.0",)


class EtcOptions(IterativeOptions):
    theta: float = Field(
        1.3, description="retrieve at the first word whose trend score exceeds this (the authors' released "
        "hallucination_threshold: 1.3)")
    absolute: bool = Field(False, description="compare |score| with theta (the authors' thres_abs), so a sharp fall "
                                              "triggers too")
    weight: Literal["none", "attention"] = Field(
        "none", description="none: the smoothed entropy trend alone (every backend); attention: times each word's "
        "largest attention over the text, scaled to average 1 per sentence (the authors' score; needs attention)")
    query: Literal["full_context", "previous_sentence", "last_words", "confident_sentence"] = Field(
        "full_context", description="what is searched for at a trigger: the question and the answer so far, the last "
        "finished sentence, the last query_words words, or the triggering sentence without its improbable tokens")
    query_words: int = Field(35, ge=1, description="query=last_words: words in the query (the authors keep 35 words)")
    query_min_prob: float = Field(0.4, ge=0.0, le=1.0,
                                  description="query=confident_sentence: tokens below this probability are left out")
    documents: Literal["keep", "sentence"] = Field(
        "keep", description="keep: the documents replace the previous ones for the rest of the answer (DRAGIN's loop); "
        "sentence: they serve the next sentence only (the authors' code)")
    chunk_tokens: int = Field(64, ge=4, description="tokens decoded per step before checking")
    content_words: Literal["stopwords", "pos"] = Field(
        "stopwords", description="which words form the entropy sequence: not stopwords, or part of speech from spaCy")
    pos_model: str = Field("en_core_web_sm", description="the spaCy pipeline for content_words=pos")


@dataclass
class EtcScores:
    """Per generated word: its entropy, the trend signals, the weight and the score that triggers."""

    words: list[WordSpan]
    entropy: np.ndarray
    d1: np.ndarray
    d2: np.ndarray
    smoothed: np.ndarray
    weight: np.ndarray
    scores: np.ndarray
    content: np.ndarray
    sentence: np.ndarray

    def details(self, trigger: int | None, theta: float) -> dict[str, Any]:
        def rounded(values: np.ndarray) -> list[float]:
            return [round(float(v), 4) for v in values]

        # `words` + `scores` + `threshold` is what the trace viewer shades by.
        return {"words": [w.text for w in self.words], "scores": rounded(self.scores), "threshold": theta,
                "trigger": trigger, "entropy": rounded(self.entropy), "d1": rounded(self.d1), "d2": rounded(self.d2),
                "smoothed": rounded(self.smoothed), "weight": rounded(self.weight),
                "content": [bool(c) for c in self.content]}


def etc_scores(raw_tokens: list[str], pieces: list[str], entropies, content_test: ContentTest,
               token_attention: np.ndarray | None = None) -> EtcScores:
    """Score the generated words; ``token_attention`` (the (T, T) generated-token matrix) adds the
    attention weight, else every weight is 1."""
    words = merge_words(raw_tokens, pieces)
    content = np.asarray(content_test([w.text for w in words]), dtype=bool) if words else np.zeros(0, dtype=bool)
    entropy = word_max(entropies, words)
    trend = entropy_trend(entropy, content)
    sentence = sentence_index(words)
    weight = np.ones(len(words))
    if token_attention is not None and words:
        weight = per_sentence(attention_focus(word_attention(token_attention, words)), sentence)
    return EtcScores(words, entropy, trend.d1, trend.d2, trend.smoothed, weight, trend.smoothed * weight, content,
                     sentence)


class Etc(IterativeMethod):
    """ETC: retrieve when the entropy of the generated words starts rising sharply (its smoothed second difference)."""

    name: ClassVar[str] = "etc"
    Options: ClassVar[type] = EtcOptions
    traits: ClassVar[MethodTraits] = MethodTraits(tune_space=TUNE_SPACE)

    def __init__(self, lm, builder, options, retriever):
        require(lm, "logprobs", needed_by="method 'etc'",
                instead="use fixed_sentence or fixed_length, which need text only")
        if options.weight == "attention":
            require(lm, "attention", needed_by="method 'etc' with weight=attention",
                    instead="use weight=none, the entropy trend alone, which every backend gives")
        super().__init__(lm, builder, options, retriever)
        if options.content_words == "pos":
            tagger = spacy_tagger(options.pos_model)  # fails now, with the fix, if it is not installed
            self._content: ContentTest = lambda words: content_flags(words, "pos", tagger)
        else:
            self._content = lambda words: content_flags(words, "stopwords")

    def answer(self, question: str) -> Answer:
        o = self.options
        state = self.start(question)
        attention = o.weight == "attention"
        protect_first_sentence = False  # after a retrieval, the next sentence is kept unchecked
        while not self.done(state):
            checking = self.can_retrieve(state)
            # With attention the weights are scaled per sentence, so a score is final only at its
            # sentence's end, and a part-of-speech tag may change with the words after it: those
            # chunks are decoded whole.
            early = checking and not attention and o.content_words == "stopwords"
            watch = self._watch(protect_first_sentence) if early else None
            gen = self.generate(state, o.chunk_tokens, capture_attention=attention, stop_when=watch)
            scored = etc_scores(gen.raw_tokens, gen.pieces, gen.entropies, self._content,
                                gen.generated_attention() if attention else None)
            trigger = self._trigger(scored, protect_first_sentence) if checking else None
            if trigger is None:
                self.keep(state, gen, details=scored.details(None, o.theta))
                protect_first_sentence = False
                if gen.stop_reason not in ("length", "callback"):
                    break
                continue
            self.keep(state, gen, scored.words[trigger].start, details=scored.details(trigger, o.theta))
            self.retrieve(state, self._query(state, gen, scored, trigger),
                          reason=f"entropy trend {scored.scores[trigger]:.2f} > {o.theta} at '{scored.words[trigger].text}'")
            # keep: the sentence after a retrieval is not checked; sentence: that sentence is written
            # apart, with the documents, and the next chunk is checked as any other.
            protect_first_sentence = o.documents == "keep"
            if o.documents == "sentence" and not self._one_sentence(state):
                break
        return self.finish(state)

    def _trigger(self, scored: EtcScores, protect_first_sentence: bool, complete: int | None = None) -> int | None:
        eligible = scored.sentence >= (1 if protect_first_sentence else 0)
        if complete is not None:
            eligible &= np.arange(len(scored.words)) < complete
        return trend_trigger(np.where(eligible, scored.scores, -np.inf), self.options.theta, self.options.absolute)

    def _watch(self, protect_first_sentence: bool) -> Callable[[Any], bool]:
        """A decoding callback: stop as soon as a finished word triggers. A word's score reads only the
        words up to it, so it is final once the next word has begun, and the full chunk would give the
        same trigger."""

        def watch(state) -> bool:
            scored = etc_scores(state.raw_tokens, state.pieces, state.entropies, self._content)
            return self._trigger(scored, protect_first_sentence, complete=len(scored.words) - 1) is not None

        return watch

    def _query(self, state: LoopState, gen: Generation, scored: EtcScores, trigger: int) -> str:
        o = self.options
        members = np.flatnonzero(scored.sentence == scored.sentence[trigger])
        start, end = scored.words[members[0]].start, scored.words[members[-1]].end
        return query_of(o.query, state.question, state.answer, gen.pieces[start:end],
                        [float(x) for x in gen.logprobs[start:end]], o.query_words, o.query_min_prob)

    def _one_sentence(self, state: LoopState) -> bool:
        """The authors' use of the documents: one sentence written with them, then none again.
        False when that sentence ended the answer."""
        after = self.generate(state, self.options.chunk_tokens, stop_after=SENTENCE_ENDS)
        self.keep(state, after, details={"with_documents": True})
        state.hits = []
        return after.stop_reason in ("stop_after", "length")
