"""What a paper table is: its runs (dataset, method, options: the paper's or the authors' released
settings), its columns and the published cells it is compared with (``data/published.json``), and
the ``TABLES`` registry the papers' modules (dragin, deeprag, bestpractice, world) fill."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from dynrag.data import data_path
from dynrag.io.files import read_json
from dynrag.registry import Registry

@lru_cache(maxsize=1)
def published() -> dict[str, Any]:
    """The typed published numbers and released settings (``data/published.json``). A table whose
    entry names ``cells_from`` (other tables) shows their cells, merged per group, dataset and row,
    so a number is typed once however many tables print it."""
    path = data_path("published.json")
    data = read_json(path, "published numbers")
    for entry in data["tables"].values():
        for other in entry.get("cells_from", []):
            for group, datasets in data["tables"][other]["cells"].items():
                for dataset, rows in datasets.items():
                    for row, cells in rows.items():
                        entry.setdefault("cells", {}).setdefault(group, {}).setdefault(dataset, {}) \
                            .setdefault(row, {}).update(cells)
    return data


@dataclass(frozen=True)
class RunSpec:
    """One run of a table: a row (``key``, ``label``) on one dataset."""

    dataset: str
    key: str  # the row's key in the published cells, and the run directory's name unless `directory` says
    label: str
    method: str
    options: dict[str, Any]
    retriever: str | None = None  # None: the command's --retriever (or the method's default)
    model: str | None = None  # None: the command's --model (DeepRAG's rows name their checkpoints)
    baseline: str | None = None  # the key of the row whose run is this run's --baseline (same dataset)
    reader: str | None = None  # the loader of the dataset's file when it is not `dataset` (e.g. jsonl)
    scorer: str | None = None  # None: the table's (a table over a world and the benchmarks scores each its way)
    # A row of the paper's that needs a model of its own (a trained classifier, a reasoning model):
    # printed with its published cells, never run.
    published_only: bool = False
    # The run directory's name when another table runs the same row under its own key (the world
    # table's `dragin` is the dynamic-family table's `dragin_paper`): both tables then read one run.
    directory: str | None = None


@dataclass(frozen=True)
class Column:
    """A column group: our summary figure beside the published metric, and their difference."""

    title: str
    ours: str | None  # summary.json key ("a.b" for a nested one), or None when we have no such figure
    paper: str | None  # published metric key, or None when the paper gives none
    digits: int = 3


@dataclass
class Table:
    name: str
    title: str
    datasets: list[str]
    runs: list[RunSpec]
    columns: Callable[[str], list[Column]]  # per dataset
    published_cells: dict[str, dict[str, dict[str, float]]]  # dataset -> row key -> metric -> value
    paper_setting: str  # one line: what the published numbers were measured with
    scorer: str = "squad"
    notes: list[str] = field(default_factory=list)  # printed as "Source: ..."
    paper_corpus: str | None = None  # what the paper retrieved from, when it is not what `contexts` pools
    remarks: list[str] = field(default_factory=list)  # printed as they are, after the tables
    dataset_remarks: dict[str, str] = field(default_factory=dict)  # dataset -> a remark printed only when it is shown
    # The request with what the table finds for itself (data file, corpus), before anything runs.
    prepare: Callable[[Any], Any] | None = None
    # Lines computed from the results ({(dataset, row key): summary or None}), after the tables.
    after: Callable[[dict[tuple[str, str], Any]], list[str]] | None = None
    # Whether a row may be carried from an earlier record (reproduce/carried_rows.py): False when
    # the table's lines read more of each question than a record keeps (a world's hops, decisions).
    carries_rows: bool = True


TABLES: Registry[Callable[..., Table]] = Registry("table")

# What the papers of DRAGIN and DeepRAG retrieved from, named in their tables' Δ headers.
WIKIPEDIA_BM25 = "BM25 over Wikipedia"


def paper_cells(table: str, group: str) -> dict[str, Any]:
    """The published cells of ``table`` for ``group`` (a paper model, or "paper"): row -> metric -> value."""
    return published()["tables"][table]["cells"].get(group, {})


def summary_figure(summary: dict[str, Any], key: str) -> float | None:
    """The number at ``key`` of a summary ("a.b" for a nested one); None when there is none."""
    value: Any = summary
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value if isinstance(value, (int, float)) else None


def records_of(summary: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """A row's per-question records (its run's predictions.jsonl, found through the ``run_dir``
    that ``reproduce`` adds to each summary, or the scores of a row carried from an earlier
    record); None when the row was not run. The file is read once a report: the records are kept
    in the report's summary, since every claim on the row, and its record, read them again."""
    from dynrag.io.jsonl import read_jsonl
    from dynrag.io.rundir import PREDICTIONS

    if summary and summary.get("question_records") is not None:
        return summary["question_records"]
    if not summary or not summary.get("run_dir"):
        return None
    summary["question_records"] = read_jsonl(Path(summary["run_dir"]) / PREDICTIONS)
    return summary["question_records"]
