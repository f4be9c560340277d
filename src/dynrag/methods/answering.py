"""The single-pass answer every simple method ends with: generate, then make sure it is finished."""

from __future__ import annotations

import time
from typing import Literal

from pydantic import Field

from dynrag.lm.base import LanguageModel
from dynrag.methods.base import Answer, ReasoningOptions, Step, Trace
from dynrag.methods.prompting import (
    ANSWER_STOPS,
    PromptBuilder,
    extract_answer,
    finish_answer,
    has_complete_answer,
    short_answer,
)
from dynrag.retrieval.base import Hit

# A short answer is a name, a date or a number: a few tokens, and a model that goes on past its
# line is cut off there anyway.
SHORT_ANSWER_TOKENS = 32


class OnePassOptions(ReasoningOptions):
    """Options of a method that answers in one generation."""

    answer: Literal["reasoned", "short"] = Field(
        "reasoned", description="reasoned: a sentence or two of reasoning, then the answer phrase; "
        "short: the answer alone (small instruct models read better so)")

    def builder_for(self, builder: PromptBuilder) -> PromptBuilder:
        builder = self.styled(builder)
        return builder.answering_short() if self.answer == "short" else builder


def complete_answer(
    lm: LanguageModel,
    builder: PromptBuilder,
    trace: Trace,
    question: str,
    hits: list[Hit] | None,
    answer_so_far: str,
) -> Answer:
    """Finish an answer whose text lacks the answer phrase, then extract the short answer."""
    text = answer_so_far
    if not has_complete_answer(text, builder.answer_phrase):
        appended, gen = finish_answer(lm, builder, question, hits, text)
        trace.note_prompt(gen.prompt)
        trace.steps.append(Step("finish", appended, appended, len(gen)))
        text = text.rstrip() + (" " if text.strip() and not appended.startswith((".", " ")) else "") + appended
        text = text.strip()
    final = extract_answer(text, builder.answer_phrase) or ""
    return Answer(text=text.strip(), final_answer=final, trace=trace)


def answer_once(
    lm: LanguageModel,
    builder: PromptBuilder,
    trace: Trace,
    question: str,
    hits: list[Hit] | None,
    max_new_tokens: int,
    started: float,
) -> Answer:
    # The short style opens the answer with the answer phrase; the reasoned one starts empty.
    opener = builder.answer_phrase if builder.short else ""
    if builder.short:
        max_new_tokens = min(max_new_tokens, SHORT_ANSWER_TOKENS)
    gen = lm.generate(builder.build(question, hits, opener, lm=lm, max_new_tokens=max_new_tokens), max_new_tokens,
                      stop=ANSWER_STOPS)
    trace.note_prompt(gen.prompt)
    trace.steps.append(Step("generate", gen.text, gen.text, len(gen)))
    if builder.short:
        answer = Answer(text=f"{opener} {gen.text.strip()}", final_answer=short_answer(gen.text, opener), trace=trace)
    else:
        answer = complete_answer(lm, builder, trace, question, hits, gen.text.strip())
    trace.seconds = time.perf_counter() - started
    return answer
