"""DRAGIN: RIND decides when to retrieve, QFS decides what to search for (Su et al., ACL 2024).

The `paper` variant scores words from what decoding captured (entropy and last-layer attention of
later tokens), cuts the answer before the triggering word, searches with the QFS query, replaces the
documents and continues from the cut. The `reference` variant is the authors' released algorithm
(`reference.py`): chunks are written without documents and scored by an extra pass; a trigger cuts
the answer at the start of its sentence, the query comes from a fresh pass over question + text +
that sentence, cut to its last 64 tokens, and the new documents serve one sentence only.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
from pydantic import Field, model_validator

from dynrag.lm.base import Generation, require
from dynrag.methods.base import Answer, MethodTraits
from dynrag.methods.query_forms import QueryForm, query_of
from dynrag.methods.dragin.reference import reference_qfs_query, reference_word_scores
from dynrag.methods.dragin.scoring import (
    authors_trigger,
    first_trigger,
    qfs_select,
    reference_trigger,
    rind_scores,
    settled_trigger,
    word_attention,
    word_entropy,
)
from dynrag.methods.dragin.wordscores import ContentTest, WordScores, sentence_index
from dynrag.methods.iterative import SENTENCE_ENDS, IterativeMethod, IterativeOptions, LoopState, ends_sentence
from dynrag.methods.prompting import ANSWER, QUESTION
from dynrag.text.content import content_flags, spacy_tagger
from dynrag.text.stopwords import strip_punctuation
from dynrag.text.words import merge_words


# Default thresholds per variant; RIND's scale depends on the model. `paper`: answering HotpotQA
# questions 41-54 without retrieval, SmolLM2-135M's (then the default) largest RIND score per answer
# had quartiles 0.29 / 0.38 / 0.70 (gemma3-270m: 0.10 / 0.14 / 0.24), so 0.3 makes about three answers
# in four retrieve. `reference`: its weights average 1 within a sentence, the scale of the authors'
# released thresholds (0.6-1.5 by model and dataset); 1.2 is theirs for Llama2-13b-chat and
# Vicuna-13b on HotpotQA.
DEFAULT_THETA = {"paper": 0.3, "reference": 1.2}
# The authors' BM25 query keeps its last 64 tokens of the model's tokenizer.
DEFAULT_QUERY_TOKENS = {"paper": None, "reference": 64}
# A sentence whose only words over theta are stopwords: the authors' code retrieves there (with a
# query of the first content words: roughly the question); `skip` does not trigger on it.
DEFAULT_STOPWORD_TRIGGER = {"paper": "skip", "reference": "authors"}


class DraginOptions(IterativeOptions):
    variant: Literal["paper", "reference"] = Field("paper", description="how RIND scores are computed")
    theta: float | None = Field(
        None, ge=0.0,
        description="retrieve at the first word whose score exceeds this; None: the variant's default",
    )
    query_words: int = Field(25, ge=1, description="QFS: content words in the query (query=last_words: words)")
    query: QueryForm = Field(
        "qfs", description="what is searched for once RIND fires (DRAGIN's Table 6): qfs (attention-selected "
        "words), previous_sentence (FS-RAG's), last_words (FL-RAG's window), confident_sentence (FLARE's: the "
        "triggering sentence without its improbable tokens) or full_context (question and answer so far)",
    )
    query_min_prob: float = Field(
        0.4, ge=0.0, le=1.0, description="query=confident_sentence: tokens below this probability are left out"
    )
    chunk_tokens: int = Field(64, ge=4, description="tokens decoded per step before checking")
    early_stop: bool = Field(True, description="paper variant: stop decoding at the end of the sentence where a trigger fired")
    settled_stop: bool = Field(
        True,
        description="paper variant, with early_stop: stop as soon as the first trigger can no longer change "
        "(no earlier word can still cross theta), before the sentence ends; the same decisions, fewer tokens. "
        "Off with content_words=pos (a later word can change an earlier word's tag)",
    )
    content_words: Literal["stopwords", "pos"] = Field(
        "stopwords", description="content-word rule: a stopword list, or part of speech from a spaCy pipeline"
    )
    pos_model: str = Field("en_core_web_sm", description="the spaCy pipeline for content_words=pos")
    max_query_tokens: int | None = Field(
        None, ge=1, description="keep the query's last N tokens; None: the variant's default (reference 64, paper no cut)"
    )
    stopword_trigger: Literal["authors", "skip"] | None = Field(
        None,
        description="a sentence whose only words over theta are stopwords: 'authors' retrieves (as the released "
        "code, with the first content words as the query), 'skip' does not; None: the variant's default "
        "(reference authors, paper skip; paper accepts only skip)",
    )

    @model_validator(mode="after")
    def _stopword_trigger_is_reference_only(self) -> "DraginOptions":
        if self.variant == "paper" and self.stopword_trigger == "authors":
            raise ValueError("stopword_trigger=authors is the released code's rule and needs variant=reference "
                             "(the paper variant's score holds s_i, so a stopword never triggers)")
        return self


def paper_scores(
    raw_tokens: list[str], pieces: list[str], entropies, token_attention, content_test: ContentTest | None = None
) -> WordScores:
    words = merge_words(raw_tokens, pieces)
    if not words:
        return WordScores.empty(words)
    content = np.asarray((content_test or _stopword_test)([w.text for w in words]), dtype=bool)
    entropy = word_entropy(np.asarray(entropies), words)
    attention = word_attention(token_attention, words)
    scores = rind_scores(entropy, attention, content)
    n = len(words)
    a_max = np.array([attention[i + 1 :, i].max() if i + 1 < n else 0.0 for i in range(n)])
    return WordScores(words, entropy, a_max, content, scores, sentence_index(words))


def _stopword_test(words) -> list[bool]:
    return content_flags(words, "stopwords")


class Dragin(IterativeMethod):
    name: ClassVar[str] = "dragin"
    traits: ClassVar[MethodTraits] = MethodTraits(needs_attention=True)
    Options: ClassVar[type] = DraginOptions

    def __init__(self, lm, builder, options, retriever):
        instead = (
            "RIND weighs each word by the attention later words pay it and QFS builds its query from that "
            "attention, while an HTTP model server returns only log-probabilities; use a local model (--model "
            "bundled or hf:PATH; on backend=llama.cpp a transformers pass reads the attention) for dragin, or a "
            "method that needs no attention: flare (token probabilities), fixed_sentence, fixed_length, single or direct"
        )
        require(lm, "logprobs", needed_by="method 'dragin'", instead=instead)
        require(lm, "attention", needed_by="method 'dragin'", instead=instead)
        if options.variant == "reference":
            require(lm, "attention_pass", needed_by="method 'dragin' with variant=reference",
                    instead="use variant=paper, which needs only what decoding captured")
        super().__init__(lm, builder, options, retriever)
        self.chain.max_query_tokens = self.max_query_tokens  # the variant's default when not given
        if options.content_words == "pos":
            tagger = spacy_tagger(options.pos_model)  # fails now, with the fix, if it is not installed
            self._content: ContentTest = lambda words: content_flags(words, "pos", tagger)
        else:
            self._content = _stopword_test

    @property
    def theta(self) -> float:
        return DEFAULT_THETA[self.options.variant] if self.options.theta is None else self.options.theta

    @property
    def max_query_tokens(self) -> int | None:
        if self.options.max_query_tokens is not None:
            return self.options.max_query_tokens
        return DEFAULT_QUERY_TOKENS[self.options.variant]

    @property
    def settled_stop(self) -> bool:
        """`settled_stop` as applied: off with part-of-speech content words, whose tags depend on the
        words that follow (an earlier word's s_i may still change, so no trigger is ever settled)."""
        return self.options.settled_stop and self.options.content_words != "pos"

    @property
    def stopword_trigger(self) -> str:
        return self.options.stopword_trigger or DEFAULT_STOPWORD_TRIGGER[self.options.variant]

    def start(self, question: str) -> LoopState:
        state = super().start(question)
        state.trace.options["theta"] = self.theta  # the resolved values, not None
        state.trace.options["max_query_tokens"] = self.max_query_tokens
        state.trace.options["stopword_trigger"] = self.stopword_trigger
        state.trace.options["settled_stop"] = self.settled_stop
        return state

    def answer(self, question: str) -> Answer:
        if self.options.variant == "reference":
            return self._answer_reference(question)
        state = self.start(question)
        protect_first_sentence = False  # after a retrieval, the next sentence is kept unchecked
        while not self.done(state):
            checking = self.can_retrieve(state)
            stop_when = None
            if checking and self.options.early_stop:
                stop_when = self._trigger_watch(protect_first_sentence)
            gen = self.generate(state, self.options.chunk_tokens, capture_attention=True, stop_when=stop_when)
            scored = paper_scores(gen.raw_tokens, gen.pieces, gen.entropies, gen.generated_attention(), self._content)
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
            self.keep(state, gen, scored.words[trigger].start, details=scored.details(trigger))
            if self.options.query == "qfs":
                query = self._qfs_query(gen, scored.words[trigger].start)  # the chain cuts it to max_query_tokens
            else:
                members = np.flatnonzero(scored.sentence == scored.sentence[trigger])
                query = self._other_query(state, gen, scored.words[members[0]].start, scored.words[members[-1]].end, "")
            self.retrieve(state, query, reason=f"RIND {scored.scores[trigger]:.2f} > {self.theta} "
                                                f"at '{scored.words[trigger].text}'")
            protect_first_sentence = True
        return self.finish(state)

    def _answer_reference(self, question: str) -> Answer:
        """The authors' loop: chunks without documents; a trigger cuts at its sentence's start,
        retrieves, writes one sentence with the new documents, and drops them again.

        As in the authors' code every chunk is decoded at its full length, the last one too: the
        kept text may pass `max_new_tokens`, and a trigger past the budget still retrieves."""
        state = self.start(question)
        while not self.done(state):
            checking = self.can_retrieve(state)
            gen = self.generate(state, self.options.chunk_tokens, within_budget=False)
            scored = reference_word_scores(self.lm, gen, self._content) if checking else None
            found = self._reference_trigger(scored) if scored else None
            if found is None:
                self.keep(state, gen, details=scored.details(None) if scored else {})
                if gen.stop_reason != "length":
                    break
                continue
            sentence, first, hits = found
            members = np.flatnonzero(scored.sentence == sentence)
            words = [scored.words[i] for i in members]
            self.keep(state, gen, words[0].start, details=scored.details(first))
            if self.options.query == "qfs":
                query, made_of = reference_qfs_query(
                    self.lm, state.question, state.answer, gen, words, [int(h - members[0]) for h in hits],
                    self.options.query_words, self._content,
                )
            else:
                start, end = words[0].start, words[-1].end
                query = self._other_query(state, gen, start, end, "".join(gen.pieces[start:end]))
                made_of = {"hit_words": [scored.words[h].text for h in hits]}
            if len(hits):
                reason = f"RIND > {self.theta} at '{', '.join(made_of['hit_words'])}'"
            else:
                over = [scored.words[i].text for i in members if scored.entropy[i] * scored.attention[i] > self.theta]
                reason = f"H * a > {self.theta} at stopwords only ('{', '.join(over)}'): the first content words as the query"
            self.retrieve(state, query, reason=reason)
            # The new documents serve one sentence; the next chunk is written without them again.
            after = self.generate(state, self.options.chunk_tokens, within_budget=False, stop_after=SENTENCE_ENDS)
            self.keep(state, after, details={"with_documents": True})
            state.hits = []
            if after.stop_reason not in ("stop_after", "length"):
                break
        return self.finish(state)

    def _reference_trigger(self, scored: WordScores) -> tuple[int, int, np.ndarray] | None:
        """(sentence, first word over theta, hit words) by the `stopword_trigger` rule."""
        if self.stopword_trigger == "authors":
            return authors_trigger(scored.entropy * scored.attention, scored.content, scored.sentence, self.theta)
        found = reference_trigger(scored.scores, scored.sentence, self.theta)
        return None if found is None else (found[0], int(found[1][0]), found[1])

    def _trigger_watch(self, protect_first_sentence: bool):
        """A decoding callback: stop when a finished sentence holds a trigger, or (settled_stop) as
        soon as the first trigger is settled before its sentence ends (scoring.settled_trigger)."""
        theta = self.theta
        content = self._content
        settled = self.settled_stop

        def watch(state) -> bool:
            at_sentence_end = bool(state.pieces) and ends_sentence(state.pieces[-1])
            if not at_sentence_end and not settled:
                return False
            n = len(state.token_ids)
            p = state.prompt_length
            matrix = np.zeros((n, n), dtype=np.float32)
            for t, row in enumerate(state.attention_rows[:n]):
                matrix[t, : t + 1] = row[p : p + t + 1]
            scored = paper_scores(state.raw_tokens, state.pieces, state.entropies, matrix, content)
            eligible = scored.sentence >= (1 if protect_first_sentence else 0)
            scores = np.where(eligible, scored.scores, -np.inf)
            if at_sentence_end:
                return first_trigger(scores, theta) is not None
            complete = len(scored.words) - 1  # the newest word may still grow
            return settled_trigger(scores, scored.entropy, scored.content, theta, complete) is not None

        return watch

    def _other_query(self, state: LoopState, gen: Generation, start: int, end: int, unkept: str) -> str:
        """The ``query`` option's form (not QFS) at a trigger whose sentence is tokens [start, end)
        of ``gen``; ``unkept``: written text the cut dropped, for full_context."""
        o = self.options
        return query_of(o.query, state.question, state.answer, gen.pieces[start:end],
                        [float(x) for x in gen.logprobs[start:end]], o.query_words, o.query_min_prob, unkept)

    # -- what: QFS (paper) -----------------------------------------------------------------

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
        content = np.asarray(self._content(texts), dtype=bool)
        selected = qfs_select(np.asarray(weights), texts, content, self.options.query_words)
        return " ".join(w for w in (strip_punctuation(s) for s in selected) if w)
