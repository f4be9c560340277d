"""The project's own packaged data: demo corpus, demo questions, few-shot exemplars."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from dynrag.errors import ConfigError
from dynrag.io.jsonl import read_jsonl


def data_path(name: str) -> Path:
    return Path(str(resources.files("dynrag.data").joinpath(name)))


def demo_passages_path() -> Path:
    return data_path("demo_passages.jsonl")


@dataclass(frozen=True)
class DemoQuestion:
    id: str
    question: str
    answers: list[str]
    supporting: list[str]
    type: str = "bridge"

    @property
    def hops(self) -> str:
        return "single-hop" if self.type == "single-hop" else "multi-hop"


def load_demo_questions() -> list[DemoQuestion]:
    rows = read_jsonl(data_path("demo_questions.jsonl"), validate=_demo_question_problem, whole=True)
    return [
        DemoQuestion(r["id"], r["question"], list(r["answers"]), list(r.get("supporting", [])), str(r.get("type", "bridge")))
        for r in rows
    ]


def _demo_question_problem(row: Any) -> str | None:
    if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not isinstance(row.get("question"), str):
        return "bad demo question (needs id and question strings)"
    if not isinstance(row.get("answers"), list) or not isinstance(row.get("supporting", []), list):
        return "bad demo question (answers and supporting must be lists)"
    return None


def _styled_default(dataset: str) -> bool:
    """Whether ``dataset`` is a registered benchmark whose entry takes the default exemplars."""
    from dynrag.datasets.formats import DATASETS, dataset_spec

    return dataset in DATASETS and dataset_spec(dataset).exemplar_style == "default"


@dataclass(frozen=True)
class Exemplar:
    question: str
    reasoning: str
    answer: str


def load_exemplars(dataset: str = "default") -> tuple[str, list[Exemplar]]:
    """(answer phrase, exemplars) for a dataset style; `default` when the dataset has none."""
    with open(data_path("exemplars.json"), encoding="utf-8") as f:
        data = json.load(f)
    styles = sorted(k for k, v in data.items() if isinstance(v, list))
    if dataset not in data:
        if dataset == "demo" or _styled_default(dataset):  # the demo questions have no style of their own
            dataset = "default"
        else:
            raise ConfigError(f"no exemplars for {dataset!r}; choose one of: {', '.join(styles)}")
    return data["answer_phrase"], [Exemplar(**e) for e in data[dataset]]
