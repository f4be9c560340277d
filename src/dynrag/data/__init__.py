"""The project's own packaged data: demo corpus, demo questions, few-shot exemplars."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from dynrag.errors import ConfigError, DataError


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
    path = data_path("demo_questions.jsonl")
    questions = []
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                questions.append(
                    DemoQuestion(
                        row["id"],
                        row["question"],
                        list(row["answers"]),
                        list(row.get("supporting", [])),
                        str(row.get("type", "bridge")),
                    )
                )
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise DataError(str(path), f"bad demo question ({exc})", line_no) from exc
    return questions


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
        if dataset in ("jsonl", "popqa", "demo"):
            dataset = "default"
        else:
            raise ConfigError(f"no exemplars for {dataset!r}; choose one of: {', '.join(styles)}")
    return data["answer_phrase"], [Exemplar(**e) for e in data[dataset]]
