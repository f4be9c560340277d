"""The one prompt builder and answer extractor every method shares.

Layout (DESIGN §5): instruction and few-shot exemplars, then retrieved documents as [1]..[k], then
the question, then the answer written so far. Each part is a named prompt segment, so attention can
be traced back to the question and the answer (DRAGIN's QFS) and away from exemplars and documents.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dynrag.data import Exemplar, load_exemplars
from dynrag.lm.base import Generation, LanguageModel, Prompt
from dynrag.retrieval.base import Hit

# Segment names methods may ask a Generation about.
EXEMPLARS, DOCUMENTS, QUESTION, ANSWER = "exemplars", "documents", "question", "answer"

# Answers are one line; a new "Question:" means the model has moved on to inventing the next item.
ANSWER_STOPS = ("\n", "Question:")


@dataclass
class PromptBuilder:
    answer_phrase: str
    exemplars: list[Exemplar]
    instruction: str = (
        "Answer the question. Reason step by step in one or two sentences, using the documents when "
        "they help, and end with \"{phrase} <answer>.\""
    )

    @classmethod
    def for_dataset(cls, dataset: str = "default", n_exemplars: int = 6) -> "PromptBuilder":
        phrase, exemplars = load_exemplars(dataset)
        return cls(phrase, exemplars[:n_exemplars])

    def exemplar_text(self) -> str:
        lines = [self.instruction.format(phrase=self.answer_phrase), ""]
        for ex in self.exemplars:
            lines.append(f"Question: {ex.question}")
            lines.append(f"Answer: {ex.reasoning} {self.answer_phrase} {ex.answer}.")
            lines.append("")
        return "\n".join(lines) + "\n"

    def build(self, question: str, hits: list[Hit] | None = None, answer_so_far: str = "") -> Prompt:
        prompt = Prompt().add(EXEMPLARS, self.exemplar_text()).mark_reusable_prefix()
        if hits:
            prompt.add("documents_header", "Documents:\n")
            docs = "".join(f"[{i}] {format_hit(h)}\n" for i, h in enumerate(hits, 1))
            prompt.add(DOCUMENTS, docs + "\n")
        prompt.add("question_label", "Question: ")
        prompt.add(QUESTION, question.strip())
        prompt.add("answer_label", "\nAnswer:")
        if answer_so_far:
            prompt.add(ANSWER, _with_leading_space(answer_so_far))
        return prompt


def format_hit(hit: Hit) -> str:
    text = " ".join(hit.text.split())
    return f"{hit.title}: {text}" if hit.title else text


def _with_leading_space(text: str) -> str:
    return text if text.startswith(" ") else " " + text


def extract_answer(text: str, phrase: str) -> str | None:
    """The short answer after the last answer phrase, or None when the phrase is absent or empty."""
    matches = list(re.finditer(re.escape(phrase), text, flags=re.IGNORECASE))
    if not matches:
        return None
    tail = text[matches[-1].end() :]
    tail = tail.lstrip(" :").split("\n", 1)[0]
    # A sentence end is a period followed by a space or the end; "Dr." and "1.5" survive.
    end = re.search(r"\.(\s|$)", tail)
    if end:
        tail = tail[: end.start()]
    tail = tail.strip().strip('"').strip()
    return tail or None


def has_complete_answer(text: str, phrase: str) -> bool:
    """True once the phrase is followed by an answer and a full stop or line end."""
    matches = list(re.finditer(re.escape(phrase), text, flags=re.IGNORECASE))
    if not matches:
        return False
    tail = text[matches[-1].end() :]
    return bool(re.search(r"\S.*?(\.(\s|$)|\n)", tail)) and extract_answer(text, phrase) is not None


def finish_answer(
    lm: LanguageModel,
    builder: PromptBuilder,
    question: str,
    hits: list[Hit] | None,
    answer_so_far: str,
    max_new_tokens: int = 24,
) -> tuple[str, Generation]:
    """Ask the model to complete the answer phrase; returns (the appended text, the generation)."""
    stem = answer_so_far.rstrip()
    if stem and not stem.endswith((".", "!", "?")):
        stem += "."
    stem = f"{stem} {builder.answer_phrase}".strip()
    gen = lm.generate(builder.build(question, hits, stem), max_new_tokens, stop=ANSWER_STOPS)
    return stem[len(answer_so_far.rstrip()) :] + gen.text, gen
