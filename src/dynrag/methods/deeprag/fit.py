"""Fitting a narrative prompt into the model's context window.

A narrative keeps every retrieval's passages, so on long paragraphs (PopQA's Wikipedia articles)
a few retrievals outgrow the window. Prompts that fit are left exactly as they are (the format
the checkpoints were trained on). One that does not loses, in order, the worked examples (they
show the format, the passages are this question's evidence), then an equal share of the passage
blocks, shortest first as in ``methods/budget.py``. What was cut is recorded in
``Prompt.truncated``.
"""

from __future__ import annotations

from typing import Any

from dynrag.lm.base import Prompt
from dynrag.methods.budget import PROMPT_MARGIN, TokenCounter, context_window, share_out, truncate_to_tokens
from dynrag.methods.budget import TRUNCATION_MARK, fits_without_counting
from dynrag.methods.deeprag.narrative import EXEMPLARS_SEG, INSTRUCTION_SEG, PASSAGES_SEG


def _rebuild(parts: list[tuple[str, str]], truncated: list[dict[str, Any]]) -> Prompt:
    prompt = Prompt()
    for name, text in parts:
        prompt.add(name, text)
        if name in (INSTRUCTION_SEG, EXEMPLARS_SEG):
            prompt.mark_reusable_prefix()
    prompt.truncated = truncated
    return prompt


def fit_to_window(prompt: Prompt, lm: Any, new_tokens: int) -> Prompt:
    """``prompt`` when it fits with ``new_tokens`` to write; else a copy cut as the module says.
    A prompt with nothing left to cut is returned as it is (the backend then names the overflow)."""
    window = context_window(lm)
    if window is None:
        return prompt
    budget = window - new_tokens - PROMPT_MARGIN
    if fits_without_counting(prompt.text, budget):
        return prompt
    count = TokenCounter(lm)
    if count(prompt.text) <= budget:
        return prompt
    parts = [(s.name, prompt.text[s.start:s.end]) for s in prompt.segments]
    truncated = list(prompt.truncated)
    if any(name == EXEMPLARS_SEG for name, _ in parts):
        parts = [(name, text) for name, text in parts if name != EXEMPLARS_SEG]
        truncated.append({"part": "exemplars"})
        if count("".join(text for _, text in parts)) <= budget:
            return _rebuild(parts, truncated)
    blocks = [i for i, (name, _) in enumerate(parts) if name == PASSAGES_SEG]
    if not blocks:
        return _rebuild(parts, truncated)
    fixed = sum(count(text) for name, text in parts if name != PASSAGES_SEG)
    mark = count(TRUNCATION_MARK + "\n")
    # one token a part of slack: parts counted apart may merge a token at each boundary
    room = budget - fixed - len(parts) - mark * len(blocks)
    sizes = [count(parts[i][1]) for i in blocks]
    for _ in range(3):  # counted part by part, as methods/prompting.py does: correct by the overshoot and redo
        fitted, cuts = list(parts), []
        for i, size, allowance in zip(blocks, sizes, share_out(sizes, room)):
            if size > allowance:
                text = parts[i][1]
                cut, _ = truncate_to_tokens(text, allowance, count)
                fitted[i] = (PASSAGES_SEG, cut + TRUNCATION_MARK + "\n")
                cuts.append({"part": "passages", "chars": len(text), "kept_chars": len(cut)})
        prompt = _rebuild(fitted, truncated + cuts)
        over = count(prompt.text) - budget
        if over <= 0:
            break
        room -= over + 4
    return prompt


__all__ = ["fit_to_window"]
