"""Rows carried from an earlier record. `reproduce TABLE --no-run --results DIR` reads each row back
from its run directory; a row whose directory is not on this machine (another machine, a cleaned
disk) is taken from the record of the same setting already in DIR, when that record kept the row's
per-question scores. Its cells are printed as recorded and its claims are tested again on its
scores, paired with the rows that are on disk, so a row that costs hours (SeaKR's) can be added to a
table whose other rows were run on a machine that is gone.

Only EM, F1 and retrievals are kept per question, so a table whose claims read more of each
question (the world's hops and retrieval decisions) does not carry rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dynrag.reproduce.records import ResultRecord, Row, load_record

# The record's cell name -> the summary key the table's columns read (record_build.CELLS reversed).
SUMMARY_KEYS = {"em": "em", "f1": "f1", "accuracy": "accuracy", "retrievals": "retrievals_per_question",
                "seconds_per_question": "wall_seconds_per_question"}


def carried_summary(record: ResultRecord, row: Row) -> dict[str, Any]:
    """What a run's summary would give the table of ``row``: its cells under the summary's keys, its
    per-question scores as records ({id, em, f1, retrievals}) and where it came from."""
    ids = record.questions[row.dataset]
    records = []
    for i, qid in enumerate(ids):
        values = {metric: row.scores[metric][i] for metric in row.scores}
        if values.get("em") is not None:  # a question the row answered
            records.append({"id": qid, **{m: v for m, v in values.items() if v is not None}})
    summary: dict[str, Any] = {SUMMARY_KEYS[name]: value for name, value in row.cells.items() if name in SUMMARY_KEYS}
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
    Only rows with per-question scores are carried, and only when the report reads no world."""
    from dynrag.reproduce.record_build import data_files, table_record_id

    missing = [key for key, summary in report["results"].items() if summary is None]
    if not missing or report["request"].world is not None:
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
