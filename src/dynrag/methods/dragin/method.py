"""DRAGIN: RIND decides when to retrieve, QFS decides what to search for (DESIGN §5).

The `paper` variant scores words from what decoding captured (entropy and last-layer attention of
later tokens). The `reference` variant follows the authors' released code: an extra forward pass over
the generated tokens alone, attention normalised within each sentence. Both cut the answer where the
trigger fired, search with the QFS query, replace the documents and continue from the cut.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from dynrag.lm.base import Generation, require
from dynrag.methods.base import Answer
from dynrag.methods.dragin.scoring import (
    first_trigger,
    qfs_select,
    reference_attention_weights,
    reference_scores,
    reference_token_weights,
    rind_scores,
    word_attention,
    word_entropy,
)
from dynrag.methods.iterative import IterativeMethod, IterativeOptions, LoopState, ends_sentence
from dynrag.methods.prompting import ANSWER, QUESTION
from dynrag.text.stopwords import is_content_word, strip_punctuation
from dynrag.text.words import WordSpan, merge_words


# Default thresholds per variant; RIND's scale depends on the model. `paper`: answering HotpotQA
# questions 41-54 without retrieval, the default model's (SmolLM2-135M) largest RIND score per answer
# had quartiles 0.29 / 0.38 / 0.70 (gemma3-270m: 0.10 / 0.14 / 0.24), so 0.3 makes about three answers
# in four retrieve. `reference`: its weights average 1 within a sentence, the scale the published
# thresholds (about 1.0-1.4 for 7B-13B models) are on.
DEFAULT_THETA = {"paper": 0.3, "reference": 1.2}


class DraginOptions(IterativeOptions):
    variant: Literal["paper", "reference"] = Field("paper", description="how RIND scores are computed")
    theta: float | None = Field(
        None, ge=0.0,
        description="retrieve at the first word whose score exceeds this; None: the variant's default",
    )
    query_words: int = Field(25, ge=1, description="QFS: content words in the query")
    chunk_tokens: int = Field(64, ge=4, description="tokens decoded per step before checking")
    early_stop: bool = Field(True, description="stop decoding at the end of the sentence where a trigger fired")


@dataclass
class WordScores:
    words: list[WordSpan]
    entropy: np.ndarray
    attention: np.ndarray  # a_max (paper) or sentence-normalised weight (reference)
    content: np.ndarray
    scores: np.ndarray
    sentence: np.ndarray  # sentence index of each word

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


def paper_scores(raw_tokens: list[str], pieces: list[str], entropies, token_attention) -> WordScores:
    words = merge_words(raw_tokens, pieces)
    content = np.array([is_content_word(w.text) for w in words], dtype=bool)
    if not words:
        empty = np.zeros(0)
        return WordScores(words, empty, empty, content, empty, np.zeros(0, dtype=np.int64))
    entropy = word_entropy(np.asarray(entropies), words)
    attention = word_attention(token_attention, words)
    scores = rind_scores(entropy, attention, content)
    n = len(words)
    a_max = np.array([attention[i + 1 :, i].max() if i + 1 < n else 0.0 for i in range(n)])
    return WordScores(words, entropy, a_max, content, scores, sentence_index(words))


class Dragin(IterativeMethod):
    name: ClassVar[str] = "dragin"
    Options: ClassVar[type] = DraginOptions

    def __init__(self, lm, builder, options, retriever):
        instead = "use a local model (bundled or hf:) or a method that needs only log-probabilities (flare)"
        require(lm, "logprobs", needed_by="method 'dragin'", instead=instead)
        require(lm, "attention", needed_by="method 'dragin'", instead=instead)
        if options.variant == "reference":
            require(lm, "attention_pass", needed_by="method 'dragin' with variant=reference",
                    instead="use variant=paper, which needs only what decoding captured")
        super().__init__(lm, builder, options, retriever)

    @property
    def theta(self) -> float:
        return DEFAULT_THETA[self.options.variant] if self.options.theta is None else self.options.theta

    def start(self, question: str) -> LoopState:
        state = super().start(question)
        state.trace.options["theta"] = self.theta  # the resolved threshold, not None
        return state

    def answer(self, question: str) -> Answer:
        state = self.start(question)
        protect_first_sentence = False  # after a retrieval, the next sentence is kept unchecked
        while not self.done(state):
            checking = self.can_retrieve(state)
            stop_when = None
            if checking and self.options.early_stop and self.options.variant == "paper":
                stop_when = self._trigger_watch(protect_first_sentence)
            gen = self.generate(state, self.options.chunk_tokens, capture_attention=True, stop_when=stop_when)
            scored = self._score(gen)
            trigger = None
            if checking:
                eligible = scored.sentence >= (1 if protect_first_sentence else 0)
                trigger = first_trigger(np.where(eligible, scored.scores, -np.inf), self.theta)
            if trigger is None:
                self.keep(state, gen, details=scored.details(None))
                protect_first_sentence = False
                if gen.stop_reason not in ("length", "callback"):
                    break
                continue
            cut = self._cut_token(scored, trigger)
            self.keep(state, gen, cut, details=scored.details(trigger))
            query = self._qfs_query(gen, scored.words[trigger].start)
            self.retrieve(state, query, reason=f"RIND {scored.scores[trigger]:.2f} > {self.theta} "
                                                f"at '{scored.words[trigger].text}'")
            protect_first_sentence = True
        return self.finish(state)

    # -- when: RIND ------------------------------------------------------------------------

    def _score(self, gen: Generation) -> WordScores:
        if self.options.variant == "paper":
            return paper_scores(gen.raw_tokens, gen.pieces, gen.entropies, gen.generated_attention())
        return self._reference_scores(gen)

    def _reference_scores(self, gen: Generation) -> WordScores:
        words = merge_words(gen.raw_tokens, gen.pieces)
        content = np.array([is_content_word(w.text) for w in words], dtype=bool)
        sentence = sentence_index(words)
        if not words:
            empty = np.zeros(0)
            return WordScores(words, empty, empty, content, empty, sentence)
        entropy = word_entropy(gen.entropies, words)
        heads = self.lm.attention_pass(gen.token_ids, per_head=True)
        weights = np.zeros(len(words))
        for s in np.unique(sentence):
            members = np.flatnonzero(sentence == s)
            end = words[members[-1]].end  # causal: rows up to the sentence end are a pass over them
            token_w = reference_token_weights(heads[:, :end, :end])
            weights[members] = reference_attention_weights(token_w, [words[i] for i in members])
        scores = reference_scores(entropy, weights, content)
        return WordScores(words, entropy, weights, content, scores, sentence)

    def _cut_token(self, scored: WordScores, trigger: int) -> int:
        """Paper: cut before the triggering word. Reference: cut at the start of its sentence."""
        if self.options.variant == "paper":
            return scored.words[trigger].start
        first = int(np.flatnonzero(scored.sentence == scored.sentence[trigger])[0])
        return scored.words[first].start

    def _trigger_watch(self, protect_first_sentence: bool):
        """A decoding callback: at each sentence end, stop if a finished sentence holds a trigger."""
        theta = self.theta

        def watch(state) -> bool:
            if not state.pieces or not ends_sentence(state.pieces[-1]):
                return False
            n = len(state.token_ids)
            p = state.prompt_length
            matrix = np.zeros((n, n), dtype=np.float32)
            for t, row in enumerate(state.attention_rows[:n]):
                matrix[t, : t + 1] = row[p : p + t + 1]
            scored = paper_scores(state.raw_tokens, state.pieces, state.entropies, matrix)
            eligible = scored.sentence >= (1 if protect_first_sentence else 0)
            return first_trigger(np.where(eligible, scored.scores, -np.inf), theta) is not None

        return watch

    # -- what: QFS -------------------------------------------------------------------------

    def _qfs_query(self, gen: Generation, trigger_token: int) -> str:
        """Top content words by the trigger token's attention over the question and answer so far."""
        row = gen.attention[trigger_token]
        p = gen.prompt_length
        runs = [
            gen.segment_positions(QUESTION),
            np.concatenate([gen.segment_positions(ANSWER), np.arange(p, p + trigger_token)]).astype(np.int64),
        ]
        raw = gen.prompt_raw_tokens + gen.raw_tokens
        texts: list[str] = []
        weights: list[float] = []
        for positions in runs:
            if len(positions) == 0:
                continue
            for word in merge_words([raw[i] for i in positions]):
                texts.append(word.text)
                weights.append(float(row[positions[word.start : word.end]].sum()))
        content = [is_content_word(t) for t in texts]
        selected = qfs_select(np.asarray(weights), texts, np.asarray(content, dtype=bool), self.options.query_words)
        return " ".join(w for w in (strip_punctuation(s) for s in selected) if w)
