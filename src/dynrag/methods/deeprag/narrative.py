"""The retrieval narrative: how a question, its sub-questions, decisions, passages and answers are
written as text. Inference, tree-search synthesis and training all build their text here, so what
a model is trained on is exactly what it later reads.

    Question: <question>
    Sub-question: <subquery 1>
    Answer: <answer from the model's own knowledge>
    Sub-question: <subquery 2>
    Search results:
    [1] <title>: <passage text>
    Sub-question: <subquery 2, restated by the runner>
    Answer: <answer written with the passages>
    So the answer is <final answer>.

After a sub-question the next line is the atomic decision: the retrieve marker ("Search results:",
after which the runner inserts the passages and restates the sub-question) or straight to
"Answer:". The restatement puts the question right before the answer: measured on 20 first hops of
2WikiMultihopQA train, it lifted the bundled models' exact match as readers from 0 to 0.10
(SmolLM2-135M) and 0.35 (Gemma-3-270M). After an answer the next
line is the termination decision: another sub-question, or the final-answer phrase. Every part is
a named prompt segment, so training can tell what the model wrote (learned) from what it was given
(instruction, exemplars, question, passages: never learned).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Literal

from dynrag.corpus.passage import Passage
from dynrag.data import data_path
from dynrag.lm.base import Prompt
from dynrag.lm.chat import ChatFrame
from dynrag.lm.lineage import checkpoint_meta
from dynrag.methods.prompting import extract_answer

SUBQUERY = "Sub-question:"
RETRIEVE = "Search results:"
ANSWER = "Answer:"
FINAL = "So the answer is"
INSTRUCTION = (
    "Answer the question by breaking it into sub-questions. Answer each sub-question from what you know, "
    f'or write "{RETRIEVE}" to look it up first. End with "{FINAL} <answer>."'
)

# Segment names. The model is trained on the learned ones only.
INSTRUCTION_SEG, EXEMPLARS_SEG, QUESTION_SEG = "instruction", "exemplars", "question"
SUBQUERY_SEG, DECISION_SEG, PASSAGES_SEG, ANSWER_SEG, FINAL_SEG = "subquery", "decision", "passages", "answer", "final"
RESTATED_SEG = "restated"
LEARNED_SEGMENTS = frozenset({SUBQUERY_SEG, DECISION_SEG, ANSWER_SEG, FINAL_SEG})



@dataclass(frozen=True)
class NarrativeStep:
    """One sub-question, the decision taken on it, and the answer it got."""

    subquery: str
    retrieve: bool
    answer: str
    passages: tuple[Passage, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "subquery": self.subquery,
            "retrieve": self.retrieve,
            "passages": [p.to_dict() for p in self.passages],
            "answer": self.answer,
        }


@dataclass(frozen=True)
class Exemplar:
    question: str
    steps: tuple[NarrativeStep, ...]
    final_answer: str


@lru_cache(maxsize=1)
def load_exemplars() -> tuple[Exemplar, ...]:
    """The project's own worked examples (data/deeprag_exemplars.json)."""
    with open(data_path("deeprag_exemplars.json"), encoding="utf-8") as f:
        data = json.load(f)
    out = []
    for ex in data["exemplars"]:
        steps = tuple(
            NarrativeStep(
                s["subquery"],
                bool(s["retrieve"]),
                s["answer"],
                tuple(Passage(f"exemplar-{i}", p["title"], p["text"]) for i, p in enumerate(s.get("passages", []))),
            )
            for s in ex["steps"]
        )
        out.append(Exemplar(ex["question"], steps, ex["final_answer"]))
    return tuple(out)


def format_passage(passage: Passage) -> str:
    text = " ".join(passage.text.split())
    return f"{passage.title}: {text}" if passage.title else text


def final_line(answer: str) -> str:
    answer = " ".join(answer.split()).rstrip(".")
    return f"{FINAL} {answer}.\n"


def add_subquery(prompt: Prompt, subquery: str) -> Prompt:
    return prompt.add(SUBQUERY_SEG, f"{SUBQUERY} {' '.join(subquery.split())}\n")


def add_retrieval(prompt: Prompt, passages: Iterable[Passage], subquery: str) -> Prompt:
    """The retrieve marker (the model's decision), then what the runner inserts and the model
    never learns to write: the passages found, and the sub-question restated below them."""
    prompt.add(DECISION_SEG, f"{RETRIEVE}\n")
    prompt.add(PASSAGES_SEG, "".join(f"[{i}] {format_passage(p)}\n" for i, p in enumerate(passages, 1)))
    return prompt.add(RESTATED_SEG, f"{SUBQUERY} {' '.join(subquery.split())}\n")


def add_answer_label(prompt: Prompt) -> Prompt:
    return prompt.add(ANSWER_SEG, ANSWER)


def add_step(prompt: Prompt, step: NarrativeStep) -> Prompt:
    add_subquery(prompt, step.subquery)
    if step.retrieve:
        add_retrieval(prompt, step.passages, step.subquery)
    return prompt.add(ANSWER_SEG, f"{ANSWER} {' '.join(step.answer.split())}\n")


NarrativeStyle = Literal["plain", "chat"]
NARRATIVE_STYLES: tuple[NarrativeStyle, ...] = ("plain", "chat")


@dataclass
class Narrative:
    """Builds prompts: instruction, `shots` exemplars (a reusable prefix), question, steps so far.

    With a chat ``frame`` the instruction is the system message, the exemplars and the question
    the user message, and the narrative is written in the assistant's open turn, where an instruct
    model reads as every other method prompts it (docs/deeprag.md, "Chat-framed narratives")."""

    shots: int = 4
    exemplars: tuple[Exemplar, ...] = field(default_factory=load_exemplars)
    frame: ChatFrame | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.shots <= len(self.exemplars):
            raise ValueError(f"shots must be between 0 and {len(self.exemplars)}")

    @property
    def style(self) -> NarrativeStyle:
        return "plain" if self.frame is None else "chat"

    def exemplar_text(self) -> str:
        parts = []
        for ex in self.exemplars[: self.shots]:
            example = Prompt().add("q", f"Question: {ex.question}\n")
            for step in ex.steps:
                add_step(example, step)
            parts.append(example.text + final_line(ex.final_answer) + "\n")
        return "".join(parts)

    def prompt(self, question: str, steps: Iterable[NarrativeStep] = ()) -> Prompt:
        """Everything up to the next line the model writes (a sub-question or the final answer)."""
        frame = self.frame
        question_line = f"Question: {' '.join(question.split())}"
        prompt = Prompt().add(INSTRUCTION_SEG, INSTRUCTION + "\n\n" if frame is None
                              else frame.head + INSTRUCTION + frame.between)
        if self.shots:
            prompt.add(EXEMPLARS_SEG, self.exemplar_text())
        prompt.mark_reusable_prefix()
        prompt.add(QUESTION_SEG, question_line + "\n" if frame is None else question_line + frame.tail)
        for step in steps:
            add_step(prompt, step)
        return prompt


LineKind = Literal["subquery", "final", "other"]


def parse_line(text: str) -> tuple[LineKind, str]:
    """What the model wrote where a sub-question or the final answer was due."""
    line = text.strip()
    if line.startswith(SUBQUERY):
        subquery = line[len(SUBQUERY) :].strip()
        return ("subquery", subquery) if subquery else ("other", line)
    if FINAL.lower() in line.lower():
        return "final", extract_answer(line, FINAL) or ""
    return "other", line


def parse_decision(text: str) -> tuple[Literal["retrieve", "parametric", "other"], str]:
    """What the model wrote after a sub-question: the retrieve marker, or an answer (its text)."""
    line = text.strip()
    if line.startswith(RETRIEVE.rstrip(":")):
        return "retrieve", ""
    if line.startswith(ANSWER):
        return "parametric", line[len(ANSWER) :].strip()
    return "other", line


def clean_answer(text: str) -> str:
    """An intermediate answer as generated: one line, no label echoes."""
    line = text.strip().split("\n", 1)[0]
    for label in (SUBQUERY, RETRIEVE):
        line = line.split(label, 1)[0]
    return line.strip()


def trained_prompt(model_name: str) -> tuple[int | None, NarrativeStyle | None]:
    """(worked examples, narrative style) a dynrag-trained checkpoint (`hf:DIR` holding
    deeprag.json) was trained with, read once; style "plain" for one trained before styles were
    recorded. (None, None) for any other model."""
    data = checkpoint_meta(model_name)
    if not data:
        return None, None
    prompt = data.get("prompt", {})
    shots, style = prompt.get("shots"), prompt.get("style", "plain")
    return (shots if isinstance(shots, int) and shots >= 0 else None,
            style if style in NARRATIVE_STYLES else "plain")


