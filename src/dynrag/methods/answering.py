"""The single-pass answer every simple method ends with: generate, then make sure it is finished."""

from __future__ import annotations

import time

from dynrag.lm.base import LanguageModel
from dynrag.methods.base import Answer, Step, Trace
from dynrag.methods.prompting import (
    ANSWER_STOPS,
    PromptBuilder,
    extract_answer,
    finish_answer,
    has_complete_answer,
)
from dynrag.retrieval.base import Hit


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
    gen = lm.generate(builder.build(question, hits, lm=lm, max_new_tokens=max_new_tokens), max_new_tokens,
                      stop=ANSWER_STOPS)
    trace.note_prompt(gen.prompt)
    trace.steps.append(Step("generate", gen.text, gen.text, len(gen)))
    answer = complete_answer(lm, builder, trace, question, hits, gen.text.strip())
    trace.seconds = time.perf_counter() - started
    return answer
