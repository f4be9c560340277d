"""The benchmark formats ``dynrag eval`` reads, one module each, all in one registry.

A format is a ``Dataset``: how to read its file into raw records (records.py) and how to parse
one raw record into ``QAExample``s. Adding a benchmark is one module here that registers itself
with ``@DATASETS.register(name, summary=...)`` and one import line below; CLI help and the
"unknown dataset" error list ``DATASETS``' names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dynrag.eval.examples import LoadReport, QAExample
from dynrag.registry import Registry


@dataclass
class ParseContext:
    """What a parser may need beyond the record: answer aliases, the report, the record's index."""

    aliases: dict[str, list[str]] = field(default_factory=dict)
    report: LoadReport = field(default_factory=LoadReport)
    index: int = 0


@dataclass(frozen=True)
class Dataset:
    name: str
    read: Callable[[Path], Iterator[tuple[int, int, Any]]]  # path -> (line, index, raw record)
    parse: Callable[[Any, ParseContext], list[QAExample]]
    yes_no: bool = False  # answers are yes/no: scored after mapping to yes/no
    exemplars: str | None = None  # few-shot exemplar style; None: the dataset's own name

    @property
    def exemplar_style(self) -> str:
        return self.exemplars or self.name


DATASETS: Registry[Dataset] = Registry("dataset")


def dataset_spec(name: str) -> Dataset:
    """The registered format called ``name``: its ``name``, ``yes_no`` and exemplar style (an
    unknown name lists the choices)."""
    return DATASETS.open(name)


# Each module registers its format(s) on import; this order is the order choices are listed in.
from dynrag.eval.datasets import hotpotqa  # noqa: E402,F401,I001
from dynrag.eval.datasets import musique  # noqa: E402,F401
from dynrag.eval.datasets import strategyqa  # noqa: E402,F401
from dynrag.eval.datasets import iirc  # noqa: E402,F401
from dynrag.eval.datasets import popqa  # noqa: E402,F401
from dynrag.eval.datasets import jsonl  # noqa: E402,F401
