"""Rows carried from an earlier record. `reproduce TABLE --no-run --results DIR` reads each row back
from its run directory; a row whose directory is not on this machine (another machine, a cleaned
disk) is taken from the record of the same setting already in DIR, when that record kept the row's
per-question scores. Its cells are printed as recorded and its claims are tested again on its
scores, paired with the rows that are on disk, so a row that costs hours (SeaKR's) can be added to a
table whose other rows were run on a machine that is gone.

Only EM, F1, retrievals and (on a world) whether the question needs retrieval are kept per
question, so a table whose lines read more of each question (the world table's hops and decisions,
DeepRAG's sub-questions) says so in its registry entry (``Table.carries_rows``) and carries none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dynrag.reproduce.record_build import CELLS, data_files, table_record_id
from dynrag.reproduce.records import ResultRecord, Row, load_record

# Per-question scores kept as 0/1 that the tables read as booleans.
BOOLEAN_SCORES = ("needs_retrieval",)


def carried_summary(record: ResultRecord, row: Row) -> dict[str, Any]:
    """What a run's summary would give the table of ``row``: its cells under the summary's keys, its
    per-question scores as records ({id, em, f1, retrievals}) and where it came from."""
    ids = record.questions[row.dataset]
    records = []
    for i, qid in enumerate(ids):
        values = {metric: row.scores[metric][i] for metric in row.scores}
        if values.get("em") is not None:  # a question the row answered
            records.append({"id": qid, **{m: bool(v) if m in BOOLEAN_SCORES else v
                                          for m, v in values.items() if v is not None}})
    summary: dict[str, Any] = {}
    for key, name in CELLS.items():  # each cell back under the summary key the columns read
        if name in row.cells:
            *parents, last = key.split(".")
            place = summary
            for part in parents:
                place = place.setdefault(part, {})
            place[last] = row.cells[name]
    summary["n"] = row.n
    seconds = row.cells.get("seconds_per_question")
    summary["wall_seconds"] = seconds * row.n if seconds is not None and row.n else None
    summary["question_records"] = records
    commit = (record.provenance.commit or "no commit")[:7]
    summary["carried_from"] = row.carried_from or f"{record.id} ({commit}, {record.provenance.date})"
    return summary


def carry_rows(report: dict[str, Any], directory: str | Path) -> list[str]:
    """Fill each row of ``report`` that has no result with the same row of the earlier record in
    ``directory`` (the one this report's record would replace); returns a note per carried row.
    Only rows with per-question scores are carried, and only into a table that carries rows."""
    missing = [key for key, summary in report["results"].items() if summary is None]
    if not missing or not report["table"].carries_rows:
        return []
    path = Path(directory) / f"{table_record_id(report)}.json"
    if not path.is_file():
        return []
    record = load_record(path)
    _, data_sha = data_files(report["request"], report.get("data") or {})
    if record.provenance.data_sha256 != data_sha:  # same file names, other questions: nothing to pair
        return [f"no row carried from {path}: its data files' sha256 differ from this command's"]
    rows = {(row.dataset, row.key): row for row in record.rows if row.scores.get("em")}
    notes, by_source = [], {}
    for key in missing:
        row = rows.get(key)
        if row is None:
            continue
        summary = carried_summary(record, row)
        report["results"][key] = summary
        notes.append(f"{key[0]} {row.label}: no run directory here; carried from {summary['carried_from']}")
        by_source.setdefault(summary["carried_from"], []).append(f"{key[0]} {row.label}")
    if by_source:
        table = report["table"]
        sources = "; ".join(f"{', '.join(rows)} from {source}" for source, rows in by_source.items())
        table.remarks = [*table.remarks, f"Rows carried from an earlier record, their run directories not being on "
                         f"this machine (cells as recorded, claims tested on its per-question scores): {sources}."]
    return notes
