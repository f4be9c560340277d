"""IRCoT: interleave retrieval with chain-of-thought reasoning (Trivedi et al., ACL 2023).

Retrieve with the question; then, step by step, write one reasoning sentence with every paragraph
gathered so far, and search with that sentence (``steps.step_query``). Paragraphs accumulate, each
retrieval adding its new ones, up to a budget (15 in the paper). The chain stops when a sentence
says "answer is", or after ``max_steps`` sentences. Unlike the other interleaving methods, a
retrieval adds documents rather than replacing them.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from dynrag.methods.answering import answer_once
from dynrag.methods.base import Answer, MethodTraits, Retrieval
from dynrag.methods.iterative import SENTENCE_ENDS, IterativeMethod, IterativeOptions, LoopState
from dynrag.methods.ircot.steps import Variant, add_paragraphs, says_answer, step_query

# What `dynrag tune --method ircot` searches when no --space is given (docs/methods.md, "ircot"): the paper picks
# K, the paragraphs per retrieval, from these on each dataset's dev questions.
TUNE_SPACE = ("k=2,4,6,8",)


class IrcotOptions(IterativeOptions):
    variant: Literal["paper", "reference"] = Field(
        "paper", description="paper: search with the last sentence; reference: as the authors' code (the last "
        "sentence that is not a conclusion or a sum, question words removed; near-repeat and over-long "
        "paragraphs skipped, paragraphs shown up to 350 words)")
    max_paragraphs: int = Field(15, ge=1, description="the most paragraphs gathered over a question (the paper's cap: 15)")
    max_steps: int = Field(10, ge=1, description="the most reasoning sentences (the authors' code: 10)")
    max_retrievals: int = Field(10, ge=0, description="hard cap on retrievals per question (the question's included)")
    max_sentence_tokens: int = Field(48, ge=4, description="longest sentence decoded in one step")
    reader: Literal["chain", "reread"] = Field(
        "chain", description="chain: the reasoning chain's own answer; reread: answer again from the start over all "
        "gathered paragraphs (the paper's IRCoT QA, with a reasoning reader)")


class Ircot(IterativeMethod):
    """IRCoT: each reasoning sentence is the next query; the paragraphs found accumulate up to a budget."""

    name: ClassVar[str] = "ircot"
    Options: ClassVar[type] = IrcotOptions
    traits: ClassVar[MethodTraits] = MethodTraits(tune_space=TUNE_SPACE)

    def answer(self, question: str) -> Answer:
        o = self.options
        state = self.start(question)
        sentences: list[str] = []
        self._search(state, sentences)
        while not self.done(state):
            gen = self.generate(state, o.max_sentence_tokens, stop_after=SENTENCE_ENDS)
            sentence = self.keep(state, gen, details={"paragraphs": len(state.hits)})
            if sentence.strip():
                sentences.append(sentence.strip())
            # A sentence that gives the answer ends the chain, and so does a line end, the end of
            # text, or a step that wrote nothing.
            if says_answer(sentence) or not sentence.strip() or gen.stop_reason not in ("stop_after", "length"):
                break
            if not self.done(state):
                self._search(state, sentences)
        if o.reader == "reread":
            return self._reread(state)
        return self.finish(state)

    def _search(self, state: LoopState, sentences: list[str]) -> None:
        """Search with the step's query and add what is new to the held paragraphs."""
        if not self.can_retrieve(state):
            return
        query = " ".join(step_query(state.question, sentences, self.variant).split())
        if not query:  # the reference variant's query can lose every word (a question of question words)
            return
        reason = "the question" if not sentences else "the last reasoning sentence"
        found = self.chain.retrieve(query, state.trace, position=state.kept_tokens, reason=f"IRCoT step: {reason}")
        added = add_paragraphs(state.hits, found, self.options.max_paragraphs, self.variant)
        state.hits = [*state.hits, *added]
        retrieval: Retrieval = state.trace.retrievals[-1]
        retrieval.reason += f"; {len(added)} new, {len(state.hits)} held (budget {self.options.max_paragraphs})"

    @property
    def variant(self) -> Variant:
        return self.options.variant

    def _reread(self, state: LoopState) -> Answer:
        """The paper's QA reader: a fresh answer over every gathered paragraph; the chain stays in the trace."""
        first = len(state.trace.steps)
        answer = answer_once(self.lm, self.builder, state.trace, state.question, state.hits or None,
                             self.options.max_new_tokens, state.started)
        for step in state.trace.steps[first:]:
            step.kind = "read" if step.kind == "generate" else step.kind
        return answer
