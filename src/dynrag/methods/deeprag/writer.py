"""The four things a model writes in the narrative, each from its own prompt: the next line (a
sub-question or the final answer), the decision after a sub-question, an intermediate answer
(from memory, or with passages), and the final answer when it is asked for.

The inference method and tree-search synthesis both write through this class, so a trajectory
found by the search is text the method would have produced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from dynrag.corpus.passage import Passage
from dynrag.errors import ConfigError
from dynrag.lm.base import Generation, LanguageModel
from dynrag.methods.deeprag.decision import marker_margin
from dynrag.methods.deeprag.fit import fit_to_window
from dynrag.methods.deeprag.narrative import (
    FINAL,
    Narrative,
    NarrativeStep,
    NarrativeStyle,
    add_answer_label,
    load_exemplars,
    trained_prompt,
    add_retrieval,
    add_subquery,
    clean_answer,
    parse_decision,
    parse_line,
)

LINE_END = ("\n",)


def narrative_for(lm: LanguageModel, shots: int | None = None, style: NarrativeStyle | None = None) -> Narrative:
    """How ``lm`` is prompted: a dynrag-trained checkpoint as it was trained (no worked examples,
    its recorded style); any other model with every worked example, as plain text. ``style`` chat
    asks for the model's own chat template around the narrative (docs/deeprag.md)."""
    trained_shots, trained_style = trained_prompt(lm.name)
    if shots is None:
        shots = len(load_exemplars()) if trained_shots is None else trained_shots
    style = style or trained_style or "plain"
    frame = getattr(lm, "chat_frame", None) if style == "chat" else None
    if style == "chat" and frame is None:
        why = "was trained on chat-framed narratives" if trained_style == "chat" else "is asked for a chat-framed narrative"
        raise ConfigError(f"model {lm.name!r} {why}, but it has no chat template")
    return Narrative(shots=min(shots, len(load_exemplars())), frame=frame)


@dataclass
class NarrativeWriter:
    lm: LanguageModel
    narrative: Narrative
    max_subquery_tokens: int = 40
    max_answer_tokens: int = 32

    def _generate(self, prompt, limit: int | None, default: int) -> Generation:
        new_tokens = max(1, default if limit is None else min(limit, default))
        return self.lm.generate(fit_to_window(prompt, self.lm, new_tokens), new_tokens, stop=LINE_END)

    def next_line(self, question: str, steps: Sequence[NarrativeStep], limit: int | None = None) -> tuple[str, str, Generation]:
        """("subquery", text) | ("final", answer) | ("other", line), and the generation."""
        gen = self._generate(self.narrative.prompt(question, steps), limit, self.max_subquery_tokens)
        kind, text = parse_line(gen.text)
        return kind, text, gen

    def decide(self, question: str, steps: Sequence[NarrativeStep], subquery: str,
               limit: int | None = None) -> tuple[str, str, Generation]:
        """The model's own continuation after the sub-question: ("retrieve", "") |
        ("parametric", the answer it wrote on the same line) | ("other", line)."""
        prompt = add_subquery(self.narrative.prompt(question, steps), subquery)
        gen = self._generate(prompt, limit, self.max_answer_tokens + 4)
        kind, rest = parse_decision(gen.text)
        return kind, clean_answer(rest) if kind == "parametric" else rest, gen

    def margin(self, question: str, steps: Sequence[NarrativeStep], subquery: str, bias: float = 0.0) -> tuple[float, float, float]:
        """(margin, log P(retrieve marker), log P(answer marker)) right after the sub-question."""
        prompt = fit_to_window(add_subquery(self.narrative.prompt(question, steps), subquery), self.lm, 1)
        return marker_margin(self.lm, prompt, bias)

    def answer(self, question: str, steps: Sequence[NarrativeStep], subquery: str,
               passages: Sequence[Passage] | None, limit: int | None = None) -> tuple[str, Generation]:
        """The intermediate answer: from memory (`passages` None) or after the retrieve marker."""
        prompt = add_subquery(self.narrative.prompt(question, steps), subquery)
        if passages is not None:
            add_retrieval(prompt, passages, subquery)
        gen = self._generate(add_answer_label(prompt), limit, self.max_answer_tokens)
        return clean_answer(gen.text), gen

    def final(self, question: str, steps: Sequence[NarrativeStep]) -> tuple[str, Generation]:
        """The final answer, asked for with the final-answer phrase."""
        gen = self._generate(self.narrative.prompt(question, steps).add("final_label", FINAL), None, self.max_answer_tokens)
        return final_answer_text(gen.text), gen


def final_answer_text(text: str) -> str:
    """The answer written after the final-answer phrase: one line, cut where the phrase comes again
    (a small model may go on "X. So the answer is yes", copying a worked example's ending)."""
    line = clean_answer(text)
    if line.lower().startswith(FINAL.lower()):  # the phrase echoed first: the answer follows it
        line = line[len(FINAL):].strip()
    repeat = line.lower().find(FINAL.lower())
    if repeat >= 0:
        line = line[:repeat]
    return line.strip().rstrip(".").strip()
