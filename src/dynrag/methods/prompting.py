"""The one prompt builder and answer extractor every method shares.

Layout: instruction and few-shot exemplars, then retrieved documents as [1]..[k], then
the question, then the answer written so far. Each part is a named prompt segment, so attention can
be traced back to the question and the answer (DRAGIN's QFS) and away from exemplars and documents.
A model prompted in the ``chat`` style (lm/chat.py) gets the same parts inside its chat template:
the instruction as the system message, exemplars, documents and question as the user message, and
the answer written so far as the start of the assistant's turn.
Given the model and the tokens it will write, ``build`` keeps the prompt within the model's context
window (methods/budget.py), recording what it cut in ``Prompt.truncated``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from dynrag.data import Exemplar, load_exemplars
from dynrag.lm.base import Generation, LanguageModel, Prompt
from dynrag.lm.chat import ChatFrame
from dynrag.methods.budget import (
    MIN_DOCUMENT_TOKENS,
    PROMPT_MARGIN,
    TRUNCATION_MARK,
    TokenCounter,
    context_window,
    fits_without_counting,
    share_out,
    squeeze,
    too_long,
    truncate_to_tokens,
)
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
    # Instruct models in the chat style wander into long explanations and answer with a whole
    # phrase; asking for short sentences and the shortest answer keeps their answers gradable. One
    # sentence a fact, as many as the question needs, lets a multi-hop answer write its chain, which
    # is where FLARE's and DRAGIN's triggers act (reasoning=chain, the default).
    chat_instruction: str = (
        "Answer the question. Write one short sentence for each fact you need, as many as the question "
        "needs, using the documents when they help, then end with \"{phrase} <answer>.\" where <answer> "
        "is as short as possible: a name, a date, a number, or yes or no."
    )
    # reasoning=brief: the instruction before chain readers, two sentences at most.
    brief_chat_instruction: str = (
        "Answer the question. Think in at most two short sentences, using the documents when they help, "
        "then end with \"{phrase} <answer>.\" where <answer> is as short as possible: a name, a date, "
        "a number, or yes or no."
    )
    reasoning: str = "chain"
    # The short style: the answer at once, no reasoning. The answer phrase opens the answer (and
    # the exemplars' answers), so the model writes the answer and a full stop, not a sentence about it.
    short_instruction: str = (
        "Answer the question, using the documents when they help. Reply with the answer only, in as few "
        "words as possible."
    )
    short: bool = False
    # One token counter per model (a model's counts are cached across the prompts of a question).
    _counters: dict[int, TokenCounter] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def for_dataset(cls, dataset: str = "default", n_exemplars: int = 6) -> "PromptBuilder":
        phrase, exemplars = load_exemplars(dataset)
        return cls(phrase, exemplars[:n_exemplars])

    def exemplar_text(self, exemplars: list[Exemplar] | None = None) -> str:
        return self.instruction_text() + "\n\n" + self.examples_text(exemplars)

    def with_reasoning(self, style: str) -> "PromptBuilder":
        """This builder asking chat readers for a chain (one sentence a fact) or ``brief`` reasoning."""
        return self if style == self.reasoning else replace(self, reasoning=style)

    def answering_short(self) -> "PromptBuilder":
        """This builder in the short style: the answer alone, with no reasoning before it."""
        return replace(self, short=True)

    def instruction_text(self, chat: bool = False) -> str:
        if self.short:
            return self.short_instruction
        chat_text = self.brief_chat_instruction if self.reasoning == "brief" else self.chat_instruction
        return (chat_text if chat else self.instruction).format(phrase=self.answer_phrase)

    def examples_text(self, exemplars: list[Exemplar] | None = None) -> str:
        lines = []
        for ex in self.exemplars if exemplars is None else exemplars:
            lines.append(f"Question: {ex.question}")
            reasoning = "" if self.short else f"{ex.reasoning} "
            lines.append(f"Answer: {reasoning}{self.answer_phrase} {ex.answer}.")
            lines.append("")
        return "\n".join(lines) + "\n" if lines else ""

    def build(
        self,
        question: str,
        hits: list[Hit] | None = None,
        answer_so_far: str = "",
        *,
        lm: LanguageModel | None = None,
        max_new_tokens: int = 0,
    ) -> Prompt:
        """The prompt; with ``lm``, one that leaves ``max_new_tokens`` free in its context window."""
        window = context_window(lm) if lm is not None else None
        frame = chat_frame(lm)
        if window is None:
            return self._assemble(question, hits, answer_so_far, self.exemplars, frame)
        budget = window - max_new_tokens - PROMPT_MARGIN
        # A document longer than the whole budget once squeezed cannot fit: not assembled whole.
        if not any(len(squeeze(h.text, budget + 1)) > budget for h in hits or ()):
            prompt = self._assemble(question, hits, answer_so_far, self.exemplars, frame)
            if fits_without_counting(prompt.text, budget):
                return prompt
        return self._fit(question, list(hits or []), answer_so_far, lm, window, max_new_tokens, frame)

    def _counter(self, lm: Any) -> TokenCounter:
        counter = self._counters.get(id(lm))
        if counter is None or counter.lm is not lm:
            counter = self._counters[id(lm)] = TokenCounter(lm)
        return counter

    def _fit(self, question: str, hits: list[Hit], answer_so_far: str, lm: Any, window: int,
             max_new_tokens: int, frame: ChatFrame | None) -> Prompt:
        count = self._counter(lm)
        budget = window - max_new_tokens - PROMPT_MARGIN
        notes: list[dict[str, Any]] = []
        exemplars = list(self.exemplars)
        header = count("Documents:\n\n") if hits else 0

        def fixed_tokens() -> int:
            return count(self._assemble(question, None, answer_so_far, exemplars, frame).text) + header

        fixed = fixed_tokens()
        # Exemplars give way before documents are squeezed below a useful size.
        while exemplars and (fixed > budget or (hits and budget - fixed < MIN_DOCUMENT_TOKENS * len(hits))):
            exemplars.pop()
            fixed = fixed_tokens()
        if fixed > budget:
            what = "the question" + (" and the answer written so far" if answer_so_far else "") + " alone"
            raise too_long(what, fixed, window, max_new_tokens, getattr(lm, "name", str(lm)))
        if len(exemplars) < len(self.exemplars):
            notes.append({"part": "exemplars", "kept": len(exemplars), "of": len(self.exemplars),
                          "reason": f"context window of {window} tokens"})
        if not hits:
            prompt = self._assemble(question, None, answer_so_far, exemplars, frame)
            prompt.truncated = notes
            return prompt
        room = budget - fixed
        for _ in range(3):  # counted part by part: correct by the overshoot, if any, and redo
            kept, cut = self._fit_hits(hits, room, count, window)
            prompt = self._assemble(question, kept, answer_so_far, exemplars, frame)
            over = count(prompt.text) - budget
            if over <= 0:
                break
            room -= over + 4
        prompt.truncated = notes + cut
        return prompt

    @staticmethod
    def _fit_hits(hits: list[Hit], room: int, count: TokenCounter, window: int) -> tuple[list[Hit], list[dict]]:
        longest = 8 * max(room, 1)  # characters: a longer part is over any share (budget.truncate_to_tokens)
        texts = [squeeze(h.text, longest + 1) for h in hits]  # whole when short, else cut past any share
        lines = [f"[{i}] {_titled(h.title, text)}\n" for i, (h, text) in enumerate(zip(hits, texts), 1)]
        # Exact sizes of the parts short enough to count cheaply; None: longer than any share.
        sizes = [count(line) if len(line) <= longest else None for line in lines]
        allowance = share_out(sizes, room)
        kept, cut = [], []
        for i, (hit, text, line, size, allowed) in enumerate(zip(hits, texts, lines, sizes, allowance), 1):
            if size is not None and size <= allowed:
                kept.append(hit)
                continue
            prefix = count(line[: len(line) - len(text) - 1])  # "[i] title: "
            short, tokens = truncate_to_tokens(text, allowed - prefix - count(TRUNCATION_MARK) - 1, count)
            kept.append(replace(hit, text=short + TRUNCATION_MARK))
            cut.append({"part": "document", "rank": i, "id": hit.id, "title": hit.title, "chars": len(hit.text),
                        "kept_chars": len(short), "kept_tokens": tokens,
                        "reason": f"context window of {window} tokens"})
        return kept, cut

    def _assemble(self, question: str, hits: list[Hit] | None, answer_so_far: str,
                  exemplars: list[Exemplar], frame: ChatFrame | None = None) -> Prompt:
        if frame is None:
            prompt = Prompt().add(EXEMPLARS, self.exemplar_text(exemplars)).mark_reusable_prefix()
        else:
            prompt = Prompt().add("chat_head", frame.head).add(EXEMPLARS, self.instruction_text(chat=True))
            prompt.add("chat_between", frame.between).add(EXEMPLARS, self.examples_text(exemplars))
            prompt.mark_reusable_prefix()
        if hits:
            prompt.add("documents_header", "Documents:\n")
            docs = "".join(f"[{i}] {format_hit(h)}\n" for i, h in enumerate(hits, 1))
            prompt.add(DOCUMENTS, docs + "\n")
        prompt.add("question_label", "Question: ")
        prompt.add(QUESTION, question.strip())
        if frame is None:
            prompt.add("answer_label", "\nAnswer:")
            if answer_so_far:
                prompt.add(ANSWER, _with_leading_space(answer_so_far))
        else:
            prompt.add("chat_tail", frame.tail)
            if answer_so_far.strip():
                prompt.add(ANSWER, answer_so_far.lstrip())
        return prompt


def chat_frame(lm: Any) -> ChatFrame | None:
    """The frame to build ``lm``'s prompts in (lm/chat.py's ``frame_of``)."""
    from dynrag.lm.chat import frame_of

    return frame_of(lm)


def format_hit(hit: Hit) -> str:
    return _titled(hit.title, squeeze(hit.text))


def _titled(title: str, text: str) -> str:
    return f"{title}: {text}" if title else text


def _with_leading_space(text: str) -> str:
    return text if text.startswith(" ") else " " + text


def extract_answer(text: str, phrase: str) -> str | None:
    """The short answer after the last answer phrase, or None when the phrase is absent or empty."""
    matches = list(re.finditer(re.escape(phrase), text, flags=re.IGNORECASE))
    if not matches:
        return None
    return _first_sentence(text[matches[-1].end() :])


def short_answer(text: str, phrase: str) -> str:
    """The answer of a short-style generation (what follows the answer phrase that opened it): its
    first line up to a sentence end, without an "Answer:" label; a model that wrote the phrase
    again is read after it."""
    found = extract_answer(text, phrase)
    if found is not None:
        return found
    return _first_sentence(re.sub(r"^\s*answer\s*:", "", text.strip(), flags=re.IGNORECASE)) or ""


def _first_sentence(tail: str) -> str | None:
    tail = tail.lstrip(" :").split("\n", 1)[0]
    # A sentence end is a period followed by a space or the end; "1.5" survives.
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
    prompt = builder.build(question, hits, stem, lm=lm, max_new_tokens=max_new_tokens)
    gen = lm.generate(prompt, max_new_tokens, stop=ANSWER_STOPS)
    return stem[len(answer_so_far.rstrip()) :] + gen.text, gen
