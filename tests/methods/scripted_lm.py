"""A LanguageModel whose continuations come from a script: exact control over what a method sees.

``reply(prompt_text) -> str`` decides each continuation; generate() cuts it at a stop string and
at ``max_new_tokens`` words (one "token" per word here), and records every prompt it was given.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from dynrag.lm.base import Capabilities, Generation, Prompt


class ScriptedLM:
    capabilities = Capabilities(attention=False, logprobs=True)

    def __init__(self, reply: Callable[[str], str], name: str = "scripted",
                 scores: Callable[[str, Sequence[str]], Sequence[float]] | None = None):
        self.reply, self.name = reply, name
        self.prompts: list[str] = []
        if scores is not None:  # the capability exists only then
            self.scores = scores
            self.next_token_logprobs = self._next_token_logprobs
            self.capabilities = Capabilities(attention=False, logprobs=True, next_token_logprobs=True)

    def _next_token_logprobs(self, prompt, candidates):
        text = Prompt.of(prompt).text
        self.prompts.append(text)
        return np.asarray(self.scores(text, list(candidates)), dtype=np.float64)

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, prompt, max_new_tokens, stop=(), capture_attention=False, stop_after=(), stop_when=None):
        prompt = Prompt.of(prompt)
        self.prompts.append(prompt.text)
        text = self.reply(prompt.text)
        reason = "eos"
        for s in stop:
            if s and s in text:
                text, reason = text[: text.index(s)], "stop"
        words = text.split(" ")
        if len(words) > max_new_tokens:
            text, reason = " ".join(words[:max_new_tokens]), "length"
        pieces = [w if i == 0 else " " + w for i, w in enumerate(text.split(" "))] if text else []
        n = len(pieces)
        return Generation(
            prompt=prompt, prompt_token_ids=[], prompt_offsets=[], prompt_raw_tokens=[],
            token_ids=list(range(n)), pieces=pieces, raw_tokens=pieces,
            logprobs=np.zeros(n, dtype=np.float32), entropies=np.zeros(n, dtype=np.float32),
            attention=None, stop_reason=reason, decoded_tokens=n,
        )


def last_line(prompt_text: str) -> str:
    """The prompt's unfinished last line ("" right after a newline)."""
    return prompt_text.rsplit("\n", 1)[-1]


def asked(narrative: str) -> int:
    """Sub-questions the model asked in `narrative` (not counting the runner's restatements,
    which follow a passage line)."""
    lines = narrative.split("\n")
    return sum(1 for i, line in enumerate(lines) if line.startswith("Sub-question:") and not (i and lines[i - 1].startswith("[")))
