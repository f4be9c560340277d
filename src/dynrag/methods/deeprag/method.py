"""deeprag (inference): think to retrieve step by step (DeepRAG, Guan et al., 2025).

The model writes a sub-question, then makes the atomic decision: the retrieve marker (the runner
searches with the sub-question and inserts the top-k passages) or an answer from its own
knowledge; then the intermediate answer. It repeats until it writes the final-answer phrase, or
the step limit or token budget ends the narrative (then the final answer is asked for).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import Field

from dynrag.corpus.passage import Passage
from dynrag.datasets.formats.registry import DEEPRAG_LIMITS, Dataset
from dynrag.lm.base import Generation, LanguageModel, require
from dynrag.methods.base import Answer, MethodOptions, Step, Trace
from dynrag.methods.chain import ChainOptions, RetrievingMethod
from dynrag.methods.deeprag.decision import FIXED_DECISIONS, wants_retrieval
from dynrag.methods.deeprag.narrative import (
    QUESTION_SEG,
    Narrative,
    NarrativeStep,
    final_line,
)
from dynrag.methods.deeprag.writer import NarrativeWriter, narrative_for
from dynrag.methods.direct import require_question
from dynrag.methods.prompting import PromptBuilder
from dynrag.retrieval.base import Hit, Retriever


class DeepRagOptions(ChainOptions):
    max_new_tokens: int = Field(256, ge=8, description="budget of generated tokens over the whole narrative")
    decision: Literal["generate", "margin", "always", "never"] = Field(
        "generate", description="generate: the model's own continuation; margin: marker log-probabilities + bias; "
        "always: retrieve for every sub-question; never: answer every one from the model's own knowledge",
    )
    bias: float = Field(0.0, description="added to the margin (decision=margin); > 0 retrieves more")
    max_steps: int = Field(DEEPRAG_LIMITS.max_steps, ge=1, le=20,
                           description="most sub-questions per question (default: the dataset's DeepRAG limit)")
    max_retrievals: int = Field(DEEPRAG_LIMITS.max_retrievals, ge=0, description="most retrievals per question; "
                                "later sub-questions are answered from memory (default: the dataset's DeepRAG limit)")
    shots: int | None = Field(
        None, ge=0, description="worked examples in the prompt; default: 0 for a dynrag-trained checkpoint, else all"
    )
    narrative: Literal["plain", "chat"] | None = Field(
        None, description="plain: the narrative as plain text; chat: inside the model's chat template; "
        "default: as a dynrag-trained checkpoint was trained, else plain")
    max_subquery_tokens: int = Field(40, ge=4, description="longest sub-question line")
    max_answer_tokens: int = Field(32, ge=2, description="longest intermediate or final answer")


    def for_dataset(self, dataset: Dataset) -> "DeepRagOptions":
        # The dataset's limits (one table: synthesis and training read it too); given values stay.
        limits = {k: getattr(dataset.deeprag, k) for k in ("max_steps", "max_retrievals") if k not in self.model_fields_set}
        return self.model_copy(update=limits)


def hit_passage(hit: Hit) -> Passage:
    return Passage(hit.id, hit.title, hit.text)


class DeepRag(RetrievingMethod):
    """deeprag: the model writes sub-questions and decides for each whether to retrieve."""

    name: ClassVar[str] = "deeprag"
    Options: ClassVar[type[MethodOptions]] = DeepRagOptions

    def __init__(self, lm: LanguageModel, builder: PromptBuilder | None, options: DeepRagOptions, retriever: Retriever):
        super().__init__(lm, builder, options, retriever)
        if options.decision == "margin":
            require(lm, "next_token_logprobs", needed_by="deeprag with decision=margin", instead="use decision=generate")
        self.writer = NarrativeWriter(lm, narrative_for(lm, options.shots, options.narrative), options.max_subquery_tokens,
                                      options.max_answer_tokens)

    @property
    def narrative(self) -> Narrative:
        return self.writer.narrative

    def answer(self, question: str) -> Answer:
        return self.narrate(question).answer

    def narrate(self, question: str) -> "Narration":
        """Answer, and keep the narrative's steps: what training on the method's own rollouts
        (deeprag/rollout.py) needs besides the answer."""
        question = require_question(question)
        started = time.perf_counter()
        opts = self.options
        trace = Trace(question, self.name, self.lm.name,
                      {**opts.model_dump(), "shots": self.narrative.shots, "narrative": self.narrative.style})
        run = _Run(self, question, trace)
        # Query classification (when on) decides once: a question it says needs none never retrieves.
        run.may_retrieve = self.chain.needs_retrieval(question, trace)
        final: str | None = None
        forced = False
        while len(run.steps) < opts.max_steps and run.budget_left() > 0:
            kind, text = run.next_line()
            if kind == "subquery":
                run.take_step(text)
                continue
            if kind == "final" and text:
                final = text
            break  # the final answer, or a line that is neither: ask for the final answer
        if final is None:
            final, forced = run.forced_final(), True
        trace.seconds = time.perf_counter() - started
        answer = Answer(text=(run.narrative_text() + final_line(final)).strip(), final_answer=final, trace=trace)
        return Narration(answer, tuple(run.steps), forced)


@dataclass(frozen=True)
class Narration:
    """One question's narrative as the method wrote it: the answer, the steps (with the passages
    inserted), and whether the final answer had to be asked for (the model never wrote it)."""

    answer: Answer
    steps: tuple[NarrativeStep, ...]
    forced_final: bool


class _Run:
    """One question's narrative as it is written, with the trace of every generation."""

    def __init__(self, method: DeepRag, question: str, trace: Trace):
        self.m, self.w, self.question, self.trace = method, method.writer, question, trace
        self.steps: list[NarrativeStep] = []
        self.spent = 0
        self.may_retrieve = True

    def retrievals(self) -> int:
        return sum(s.retrieve for s in self.steps)

    def budget_left(self) -> int:
        return self.m.options.max_new_tokens - self.spent

    def _record(self, gen: Generation, kind: str, details: dict[str, Any]) -> None:
        n = gen.decoded_tokens or len(gen)
        self.spent += n
        self.trace.steps.append(Step(kind, gen.text, gen.text, n, None, details))

    def next_line(self) -> tuple[str, str]:
        kind, text, gen = self.w.next_line(self.question, self.steps, self.budget_left())
        self._record(gen, "subquery", {"step": len(self.steps) + 1})
        return kind, text

    def take_step(self, subquery: str) -> None:
        opts = self.m.options
        number = len(self.steps) + 1
        margin = lp_retrieve = lp_answer = None
        answer: str | None = None
        decision_text = ""
        if opts.decision in FIXED_DECISIONS:
            retrieve = FIXED_DECISIONS[opts.decision]  # no decision asked of the model
        elif opts.decision == "margin":
            margin, lp_retrieve, lp_answer = self.w.margin(self.question, self.steps, subquery, opts.bias)
            retrieve = wants_retrieval(margin)
        else:
            kind, rest, gen = self.w.decide(self.question, self.steps, subquery, self.budget_left())
            self._record(gen, "decision", {"step": number})
            decision_text, retrieve = gen.text, kind == "retrieve"
            if kind == "parametric" and rest:
                answer = rest  # written on the decision line: no second generation
        overruled = retrieve and not self.may_retrieve
        capped = retrieve and self.may_retrieve and self.retrievals() >= opts.max_retrievals
        retrieve = retrieve and self.may_retrieve and not capped
        passages: tuple[Passage, ...] | None = None
        if retrieve:  # through the retrieval chain: plain top-k unless chain options are set
            reason = f"step {number}" + (f", margin {margin:+.3f}" if margin is not None else "")
            if opts.decision in FIXED_DECISIONS:
                reason += f", decision={opts.decision}"
            hits = self.m.chain.retrieve(subquery, self.trace, position=self.spent, reason=reason)
            passages = tuple(hit_passage(h) for h in hits)
        details: dict[str, Any] = {
            "step": number,
            "subquery": subquery,
            "decision": "retrieve" if retrieve else "parametric",
            "margin": None if margin is None else round(margin, 4),
            "logprob_retrieve": None if lp_retrieve is None else round(lp_retrieve, 4),
            "logprob_answer": None if lp_answer is None else round(lp_answer, 4),
            "decision_text": decision_text,
            "overruled_by_classifier": overruled,
            "over_retrieval_limit": capped,
            "hits": [p.id for p in passages or ()],
        }
        if answer is None:
            answer, gen = self.w.answer(self.question, self.steps, subquery, passages, self.budget_left())
            self._record(gen, "answer", details)
        else:
            self.trace.steps.append(Step("answer", answer, answer, 0, None, details))
        details["answer"] = answer
        self.steps.append(NarrativeStep(subquery, retrieve, answer, passages or ()))

    def forced_final(self) -> str:
        # The final answer may go past the token budget: a question always gets one.
        final, gen = self.w.final(self.question, self.steps)
        self._record(gen, "finish", {"step": len(self.steps) + 1})
        return final

    def narrative_text(self) -> str:
        """What the model wrote after the question (with the inserted passages)."""
        prompt = self.w.narrative.prompt(self.question, self.steps)
        return prompt.text[next(s.end for s in prompt.segments if s.name == QUESTION_SEG) :]
