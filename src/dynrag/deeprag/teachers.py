"""Teachers: who writes the sub-questions and the answers written with passages during synthesis.

The paper lets a 72B model write sub-questions and retrieved answers while the target model writes
the parametric answers. Here:

- `target` (default): the target model writes everything;
- any model spec (`bundled:gemma3-270m`, `hf:DIR`, ...): that model writes sub-questions and
  retrieved answers, the target model the parametric and final answers;
- `dataset`: sub-questions come from the dataset's own gold decomposition (MuSiQue
  `question_decomposition`, StrategyQA `decomposition`, 2Wiki `evidences`), with `#k` replaced
  by the answer this narrative gave to its k-th sub-question; the target model writes every
  answer. A documented stand-in for a large teacher, which makes the search meaningful with a
  135M model. Gold intermediate answers are never used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from dynrag.corpus.passage import Passage
from dynrag.deeprag.search import History
from dynrag.errors import ConfigError
from dynrag.datasets.formats import dataset_names, dataset_spec
from dynrag.datasets.loaders import QAExample
from dynrag.methods.deeprag.writer import NarrativeWriter
from dynrag.registry import Options, Registry

class Teacher(Protocol):
    name: str

    def next_subquery(self, example: QAExample, history: History) -> tuple[str | None, str | None]:
        """(next sub-question, None), or (None, the final answer if the teacher wrote one)."""

    def retrieved_answer(self, example: QAExample, history: History, subquery: str, passages: Sequence[Passage]) -> str: ...


@dataclass
class ModelTeacher:
    writer: NarrativeWriter
    name: str

    def next_subquery(self, example: QAExample, history: History) -> tuple[str | None, str | None]:
        kind, text, _ = self.writer.next_line(example.question, history)
        if kind == "subquery":
            return text, None
        return None, (text or None) if kind == "final" else None

    def retrieved_answer(self, example, history, subquery, passages) -> str:
        return self.writer.answer(example.question, history, subquery, passages)[0]


class NoDecomposition(Exception):
    """The question has no gold decomposition for the `dataset` teacher."""


@dataclass
class DatasetTeacher:
    target: NarrativeWriter
    name: str = "dataset"

    def next_subquery(self, example: QAExample, history: History) -> tuple[str | None, str | None]:
        if not example.decomposition:
            raise NoDecomposition(example.id)
        if len(history) >= len(example.decomposition):
            return None, None
        return phrase_subquery(example.decomposition[len(history)], [s.answer for s in history]), None

    def retrieved_answer(self, example, history, subquery, passages) -> str:
        return self.target.answer(example.question, history, subquery, passages)[0]


# ---- turning gold decomposition steps into sub-questions ----------------------------------------

# Our own wording for the relations of 2WikiMultihopQA's evidence triples and MuSiQue's KB hops.
RELATION_QUESTIONS = {
    "director": "Who directed {x}?",
    "country of citizenship": "Which country is {x} a citizen of?",
    "date of birth": "When was {x} born?",
    "country": "Which country is {x} in?",
    "date of death": "When did {x} die?",
    "country of origin": "Which country does {x} come from?",
    "place of birth": "Where was {x} born?",
    "publication date": "When was {x} released?",
    "father": "Who is the father of {x}?",
    "place of death": "Where did {x} die?",
    "performer": "Who performed {x}?",
    "spouse": "Who is the spouse of {x}?",
    "composer": "Who composed {x}?",
    "mother": "Who is the mother of {x}?",
    "cause of death": "What was the cause of death of {x}?",
    "award received": "Which award did {x} receive?",
    "educated at": "Where was {x} educated?",
    "producer": "Who produced {x}?",
    "place of burial": "Where is {x} buried?",
    "inception": "When was {x} founded?",
    "child": "Who is a child of {x}?",
    "presenter": "Who presented {x}?",
    "publisher": "Who published {x}?",
    "founded by": "Who founded {x}?",
    "employer": "Who employed {x}?",
    "sibling": "Who is a sibling of {x}?",
    "located in the administrative territorial entity": "Where is {x} located?",
    "record label": "Which record label released {x}?",
}
_REFERENCE = re.compile(r"#(\d+)")


def phrase_subquery(step: str, answers: Sequence[str]) -> str:
    """A gold step as a question: `#k` -> this narrative's k-th answer; `X >> rel` -> a question."""

    def resolve(match: re.Match[str]) -> str:
        k = int(match.group(1))
        return answers[k - 1] if 1 <= k <= len(answers) and answers[k - 1] else match.group(0)

    text = _REFERENCE.sub(resolve, step)
    if ">>" in text:
        subject, _, relation = (part.strip() for part in text.partition(">>"))
        template = RELATION_QUESTIONS.get(relation.lower(), "What is the {relation} of {x}?")
        text = template.format(x=subject, relation=relation)
    return " ".join(text.split())


# ---- the registry -----------------------------------------------------------------------------

TeacherOpener = Callable[[NarrativeWriter], Teacher]
TEACHERS: Registry[TeacherOpener] = Registry("teacher")
TEACHERS.add("target", lambda options, target: ModelTeacher(target, "target"), Options,
             "the target model writes sub-questions and retrieved answers (default)")
TEACHERS.add("dataset", lambda options, target: DatasetTeacher(target), Options,
             "sub-questions from the dataset's gold decomposition; the target model answers")


def teacher_kind(spec: str | None) -> str:
    """`target`, `dataset`, or `model` (any other value is a model spec)."""
    spec = (spec or "target").strip()
    return spec if spec in TEACHERS else "model"


def check_teacher(spec: str | None, dataset: str) -> str:
    """The teacher's resolved name; errors before anything is loaded."""
    from dynrag.lm.spec import is_model_spec

    spec = (spec or "target").strip()
    if not spec:
        raise ConfigError(f"--teacher is empty; choose one of: {TEACHERS.choices(', ')}, or a model spec")
    if spec == "dataset" and not dataset_spec(dataset).decomposes:
        raise ConfigError(
            f"--teacher dataset: {dataset} records carry no gold decomposition (it is read from "
            f"{', '.join(dataset_names(lambda d: d.decomposes))}); use --teacher target or a model spec"
        )
    if teacher_kind(spec) == "model" and not is_model_spec(spec):
        raise ConfigError(
            f"unknown teacher {spec!r}; choose one of: {TEACHERS.choices(', ')}, or a model spec "
            "(bundled | bundled:NAME | hf:PATH_OR_ID | openai:URL#MODEL)"
        )
    return spec


def open_teacher(spec: str, target: NarrativeWriter, teacher_writer: NarrativeWriter | None = None) -> Teacher:
    """The teacher for `spec`; a model teacher writes through `teacher_writer`."""
    if teacher_kind(spec) == "model":
        if teacher_writer is None:
            raise ValueError("a model teacher needs its writer")
        return ModelTeacher(teacher_writer, spec)
    return TEACHERS.open(spec, None, target)
