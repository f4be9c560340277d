"""The dataset registry: ``Dataset`` (how a benchmark's file is read and each record parsed),
``ParseContext`` and ``DATASETS``, which each format module fills when it is imported."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dynrag.datasets.examples import LoadReport, QAExample
from dynrag.registry import Registry


@dataclass
class ParseContext:
    """What a parser may need beyond the record: answer aliases, the report, the record's index."""

    aliases: dict[str, list[str]] = field(default_factory=dict)
    report: LoadReport = field(default_factory=LoadReport)
    index: int = 0


@dataclass(frozen=True)
class DecisionScoring:
    """What a dataset with ground truth about each retrieval decision adds to a run: fields on each
    prediction record (from the example and the method's answer) and a block of summary figures
    (from the records and each one's (EM, F1)) under ``summary_key``."""

    record_fields: Callable[[QAExample, Mapping[str, Any]], dict[str, Any]]
    summary_key: str
    summary_figures: Callable[[Sequence[Mapping[str, Any]], Sequence[tuple[float, float]]], dict[str, Any]]


@dataclass(frozen=True)
class Dataset:
    name: str
    read: Callable[[Path], Iterator[tuple[int, int, Any]]]  # path -> (line, index, raw record)
    parse: Callable[[Any, ParseContext], list[QAExample]]
    yes_no: bool = False  # answers are yes/no: scored after mapping to yes/no
    exemplars: str | None = None  # few-shot exemplar style; None: the dataset's own name
    decisions: DecisionScoring | None = None  # per-decision truth (a generated world), else None

    @property
    def exemplar_style(self) -> str:
        return self.exemplars or self.name


DATASETS: Registry[Dataset] = Registry("dataset")


def dataset_spec(name: str) -> Dataset:
    """The registered format called ``name``: its ``name``, ``yes_no`` and exemplar style (an
    unknown name lists the choices)."""
    return DATASETS.open(name)
