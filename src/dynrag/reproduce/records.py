"""Result records: one small JSON file per reproduced table or systems measurement under
``results/`` (docs/results-records.md), typed here so a hand-typed or stale record fails on load,
naming its file, instead of printing wrong figures on the results page.

A record holds figures only (rows, cells, claim verdicts, systems figures) and where they came
from (provenance: commit, command, model, data, machine load, date); never predictions. A table's
record also keeps each row's per-question scores by question id (EM, F1, retrievals; on a world,
whether the question needs retrieval), so a claim can be tested again against a row whose run
directory is gone (reproduce/carried_rows.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from dynrag.errors import DataError, json_problem
from dynrag.io.files import atomic_write_text

VERSION = 1
Verdict = Literal["holds", "does not hold", "undetermined"]


class Strict(BaseModel):
    """Unknown keys are errors: a misspelt field would otherwise vanish from the page silently."""

    model_config = ConfigDict(extra="forbid")


class Row(Strict):
    dataset: str
    key: str  # the table's row key (the published cells' key)
    label: str
    n: int | None = None
    cells: dict[str, float] = Field(default_factory=dict)  # em, f1 as fractions; retrievals a question
    # metric (em, f1, retrievals, needs_retrieval) -> one value per id of `questions[dataset]`, None
    # where the row has no answer; empty in records written before scores were kept
    scores: dict[str, list[float | None]] = Field(default_factory=dict)
    # "RECORD_ID (commit, date)": the row was read from that earlier record, its run directory gone
    carried_from: str | None = None


class ClaimResult(Strict):
    claim: str | None = None  # ledger id (data/claims.json), None for a claim of our own
    text: str
    dataset: str
    test: str  # e.g. "paired permutation", "McNemar (exact)", "Fisher exact"
    n: int
    p: float
    difference: float | None = None
    verdict: Verdict


class Figure(Strict):
    name: str
    value: float
    unit: str
    note: str | None = None


class ImportedFrom(Strict):
    file: str
    section: str


class Provenance(Strict):
    commit: str | None = None
    command: str | None = None
    model: str | None = None
    model_sha256: str | None = None
    data: str | None = None
    data_sha256: str | None = None
    corpus: str | None = None
    load: str | None = None
    machine: str | None = None
    wall_s: float | None = None
    date: str
    imported_from: ImportedFrom | None = None


class ResultRecord(Strict):
    version: Literal[1] = VERSION
    id: str
    kind: Literal["table", "systems"]
    table: str
    title: str
    reader: str | None = None
    datasets: list[str] = Field(default_factory=list)
    corpus: str | None = None
    rows: list[Row] = Field(default_factory=list)
    published_group: str | None = None
    published: dict[str, dict[str, dict[str, float]]] = Field(default_factory=dict)
    claims: list[ClaimResult] = Field(default_factory=list)
    figures: list[Figure] = Field(default_factory=list)
    provenance: Provenance
    questions: dict[str, list[str]] = Field(default_factory=dict)  # dataset -> the question ids rows' scores follow
    # "I/K": the record of one shard of each row (`reproduce --shard`), joined into the whole rows by
    # a later read-back (reproduce/shards.py); the results page lists it but shows no figure of it
    shard: str | None = None

    @model_validator(mode="after")
    def _scores_follow_questions(self) -> "ResultRecord":
        for i, row in enumerate(self.rows):
            ids = self.questions.get(row.dataset)
            for metric, values in row.scores.items():
                if ids is None or len(values) != len(ids):
                    raise ValueError(f"rows.{i}.scores.{metric}: {len(values)} values for "
                                     f"{0 if ids is None else len(ids)} questions of {row.dataset!r}")
        return self


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"]) or "record"
    return f"{where}: {error['msg']}"


def load_record(path: str | Path) -> ResultRecord:
    """The record in ``path``; a bad one is a DataError naming the file and its first problem."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise DataError(str(path), f"unreadable result record: {json_problem(exc)}") from exc
    except OSError as exc:
        raise DataError(str(path), f"unreadable result record ({exc})") from exc
    try:
        record = ResultRecord.model_validate(data)
    except ValidationError as exc:
        raise DataError(str(path), f"bad result record: {_first_problem(exc)}") from exc
    if record.id != path.stem:  # links on the page are built from the id: they must find the file
        raise DataError(str(path), f"bad result record: id {record.id!r} is not the file's name {path.stem!r}")
    return record


def load_records(directory: str | Path) -> list[ResultRecord]:
    """Every ``*.json`` record in ``directory``, sorted by id ([] when the directory is absent)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted((load_record(p) for p in directory.glob("*.json")), key=lambda r: r.id)


def record_json(record: ResultRecord) -> str:
    """The file's text: stable key order and indentation, so a rewrite of the same figures is
    byte-identical and a diff shows only what changed. Each per-question list is one line (185
    questions would otherwise be 185 lines a metric), and a record without scores is written as
    records were before they were kept."""
    data = record.model_dump(mode="json")
    inline: list[str] = []

    def one_line(values: list) -> str:
        # a whole number as an int (EM's 0 and 1, retrievals): a third of the bytes; it loads as a float
        values = [int(v) if isinstance(v, float) and v.is_integer() else v for v in values]
        inline.append(json.dumps(values, ensure_ascii=False))
        return f"@inline{len(inline) - 1}@"

    questions = data.pop("questions")
    if data["shard"] is None:  # written as records were before shards
        del data["shard"]
    for row in data["rows"]:
        scores = row.pop("scores")
        if row["carried_from"] is None:
            del row["carried_from"]
        if scores:
            row["scores"] = {metric: one_line(values) for metric, values in scores.items()}
    if questions:
        data["questions"] = {ds: one_line(ids) for ds, ids in questions.items()}
    text = json.dumps(data, ensure_ascii=False, indent=2)
    return re.sub(r'"@inline(\d+)@"', lambda m: inline[int(m.group(1))], text) + "\n"


def write_record(directory: str | Path, record: ResultRecord) -> Path:
    """Write ``record`` as ``DIRECTORY/<id>.json`` atomically; returns the path."""
    path = Path(directory) / f"{record.id}.json"
    atomic_write_text(path, record_json(record))
    return path
