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
class DeepRAGLimits:
    """How far one DeepRAG narrative may go on a dataset: the one table that synthesis, stage I and
    II training data, GRPO rollouts and evaluation all read, so a model is never trained under one
    limit and measured under another.

    The authors' code uses one depth per dataset, 6 on HotpotQA and 10 elsewhere: their search
    counts retrievals against it, their inference counts sub-questions. Both are kept here, with
    the same values, so each consumer applies both and none of them cuts a 3-5 hop question short.
    """

    max_retrievals: int
    max_steps: int  # sub-questions, retrieved or answered from memory


DEEPRAG_LIMITS = DeepRAGLimits(max_retrievals=10, max_steps=10)  # every dataset but HotpotQA


@dataclass(frozen=True)
class Dataset:
    name: str
    read: Callable[[Path], Iterator[tuple[int, int, Any]]]  # path -> (line, index, raw record)
    parse: Callable[[Any, ParseContext], list[QAExample]]
    yes_no: bool = False  # answers are yes/no: scored after mapping to yes/no
    exemplars: str | None = None  # few-shot exemplar style; None: the dataset's own name
    decisions: DecisionScoring | None = None  # per-decision truth (a generated world), else None
    deeprag: DeepRAGLimits = DEEPRAG_LIMITS
    decomposes: bool = False  # the parser fills QAExample.decomposition (gold sub-questions)
    aliases: bool = False  # answers may be widened by an --aliases file (2WikiMultihopQA's entity aliases)
    # DRAGIN's scorer, finding no "the answer is", scores the whole text (their 2WikiMultihopQA)
    whole_text_fallback: bool = False
    # Where the usual file sits under `reproduce --data-dir`, first found wins; () for none
    default_files: tuple[str, ...] = ()

    @property
    def exemplar_style(self) -> str:
        return self.exemplars or self.name


DATASETS: Registry[Dataset] = Registry("dataset")


def dataset_spec(name: str) -> Dataset:
    """The registered format called ``name``: its ``name``, ``yes_no`` and exemplar style (an
    unknown name lists the choices)."""
    return DATASETS.open(name)


def dataset_names(where: Callable[[Dataset], bool]) -> list[str]:
    """The names of the registered datasets whose entry passes ``where`` (for messages)."""
    return [entry.name for entry in DATASETS if where(dataset_spec(entry.name))]


def deeprag_limits(name: str) -> DeepRAGLimits:
    """The DeepRAG limits of the dataset called ``name``."""
    return dataset_spec(name).deeprag
