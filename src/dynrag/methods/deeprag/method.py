"""deeprag (inference): think to retrieve step by step (seed 002, DESIGN §5).

The model writes a sub-question, then makes the atomic decision: the retrieve marker (the runner
searches with the sub-question and inserts the top-k passages) or an answer from its own
knowledge; then the intermediate answer. It repeats until it writes the final-answer phrase, or
the step limit or token budget ends the narrative (then the final answer is asked for).
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

from pydantic import Field

from dynrag.corpus.passage import Passage
from dynrag.lm.base import Generation, LanguageModel, Prompt
from dynrag.methods.base import Answer, MethodOptions, Retrieval, Step, Trace
from dynrag.methods.deeprag.decision import marker_margin, wants_retrieval
from dynrag.methods.deeprag.narrative import (
    FINAL,
    QUESTION_SEG,
    Narrative,
    NarrativeStep,
    add_answer_label,
    add_retrieval,
    add_subquery,
    clean_answer,
    final_line,
    load_exemplars,
    parse_decision,
    parse_line,
    trained_prompt_shots,
)
from dynrag.methods.direct import require_question
from dynrag.methods.prompting import PromptBuilder
from dynrag.retrieval.base import Hit, Retriever

LINE_END = ("\n",)


class DeepRagOptions(MethodOptions):
    max_new_tokens: int = Field(256, ge=8, description="budget of generated tokens over the whole narrative")
    decision: Literal["generate", "margin"] = Field(
        "generate", description="generate: the model's own continuation; margin: marker log-probabilities + bias"
    )
    bias: float = Field(0.0, description="added to the margin (decision=margin); > 0 retrieves more")
    max_steps: int = Field(6, ge=1, le=20, description="most sub-questions per question")
    shots: int | None = Field(
        None, ge=0, description="worked examples in the prompt; default: 0 for a dynrag-trained checkpoint, else all"
    )
    max_subquery_tokens: int = Field(40, ge=4, description="longest sub-question line")
    max_answer_tokens: int = Field(32, ge=2, description="longest intermediate or final answer")


def hit_passage(hit: Hit) -> Passage:
    return Passage(hit.id, hit.title, hit.text)


class DeepRag:
    name: ClassVar[str] = "deeprag"
    Options: ClassVar[type[MethodOptions]] = DeepRagOptions

    def __init__(self, lm: LanguageModel, builder: PromptBuilder | None, options: DeepRagOptions, retriever: Retriever):
        self.lm, self.options, self.retriever = lm, options, retriever
        shots = options.shots
        if shots is None:
            trained = trained_prompt_shots(lm.name)
            shots = len(load_exemplars()) if trained is None else trained
        self.narrative = Narrative(shots=min(shots, len(load_exemplars())))

    def answer(self, question: str) -> Answer:
        question = require_question(question)
        started = time.perf_counter()
        opts = self.options
        trace = Trace(question, self.name, self.lm.name, {**opts.model_dump(), "shots": self.narrative.shots})
        run = _Run(self, question, trace)
        final: str | None = None
        while len(run.steps) < opts.max_steps and run.budget_left() > 0:
            kind, text = run.next_line()
            if kind == "subquery":
                run.take_step(text)
                continue
            if kind == "final" and text:
                final = text
            break  # the final answer, or a line that is neither: ask for the final answer
        if final is None:
            final = run.forced_final()
        trace.seconds = time.perf_counter() - started
        return Answer(text=(run.narrative_text() + final_line(final)).strip(), final_answer=final, trace=trace)


class _Run:
    """One question's narrative as it is written."""

    def __init__(self, method: DeepRag, question: str, trace: Trace):
        self.m, self.question, self.trace = method, question, trace
        self.steps: list[NarrativeStep] = []
        self.spent = 0

    def budget_left(self) -> int:
        return self.m.options.max_new_tokens - self.spent

    def _generate(self, prompt: Prompt, limit: int, kind: str, details: dict[str, Any], budgeted: bool = True) -> Generation:
        if budgeted:
            limit = max(1, min(limit, self.budget_left()))
        gen = self.m.lm.generate(prompt, limit, stop=LINE_END)
        self.spent += gen.decoded_tokens or len(gen)
        self.trace.steps.append(Step(kind, gen.text, gen.text, gen.decoded_tokens or len(gen), None, details))
        return gen

    def prompt(self) -> Prompt:
        return self.m.narrative.prompt(self.question, self.steps)

    def next_line(self) -> tuple[str, str]:
        gen = self._generate(self.prompt(), self.m.options.max_subquery_tokens, "subquery", {"step": len(self.steps) + 1})
        return parse_line(gen.text)

    def take_step(self, subquery: str) -> None:
        opts = self.m.options
        number = len(self.steps) + 1
        at_decision = add_subquery(self.prompt(), subquery)
        margin = lp_retrieve = lp_answer = None
        answer: str | None = None
        decision_text = ""
        if opts.decision == "margin":
            margin, lp_retrieve, lp_answer = marker_margin(self.m.lm, at_decision, opts.bias)
            retrieve = wants_retrieval(margin)
        else:
            gen = self._generate(at_decision, opts.max_answer_tokens + 4, "decision", {"step": number})
            decision_text = gen.text
            kind, rest = parse_decision(gen.text)
            retrieve = kind == "retrieve"
            if kind == "parametric" and rest:
                answer = clean_answer(rest)
        passages: tuple[Passage, ...] = ()
        if retrieve:
            hits = self.m.retriever.search(subquery, opts.k) if subquery.strip() else []
            self.trace.retrievals.append(
                Retrieval(subquery, hits, position=self.spent, reason=f"step {number}" + (f", margin {margin:+.3f}" if margin is not None else ""))
            )
            passages = tuple(hit_passage(h) for h in hits)
            at_answer = add_answer_label(add_retrieval(at_decision, passages))
        else:
            at_answer = add_answer_label(at_decision)
        details: dict[str, Any] = {
            "step": number,
            "subquery": subquery,
            "decision": "retrieve" if retrieve else "parametric",
            "margin": None if margin is None else round(margin, 4),
            "logprob_retrieve": None if lp_retrieve is None else round(lp_retrieve, 4),
            "logprob_answer": None if lp_answer is None else round(lp_answer, 4),
            "decision_text": decision_text,
            "hits": [p.id for p in passages],
        }
        if answer is None:
            gen = self._generate(at_answer, opts.max_answer_tokens, "answer", details)
            answer = clean_answer(gen.text)
        else:
            self.trace.steps.append(Step("answer", answer, answer, 0, None, details))
        details["answer"] = answer
        self.steps.append(NarrativeStep(subquery, retrieve, answer, passages))

    def forced_final(self) -> str:
        prompt = self.prompt().add("final_label", FINAL)
        # The final answer may go past the budget: a question always gets one.
        gen = self._generate(prompt, self.m.options.max_answer_tokens, "finish", {"step": len(self.steps) + 1}, False)
        return clean_answer(gen.text).rstrip(".").strip()

    def narrative_text(self) -> str:
        """What the model wrote after the question (with the inserted passages)."""
        prompt = self.prompt()
        return prompt.text[next(s.end for s in prompt.segments if s.name == QUESTION_SEG) :]
