"""Rows joined from their shards. `reproduce TABLE --shard I/K` runs the I-th of K shards of each
row (datasets/shard.py) into a run directory of its own, ``ROW-…-nLIMIT-shardIofK``, and with
``--results DIR`` writes that shard's record. `reproduce TABLE --no-run` without ``--shard`` then
fills each row that has no whole run with its K shards, each read from its run directory when it is
on this machine and else from its record in ``--results DIR``. A row costing more than one session
or one machine is run a shard at a time, wherever there is time.

A joined row's cells are computed again from its questions' scores (EM, F1, accuracy, retrievals,
a world's question MCC; wall time is the shards' sum), and its claims are tested on those scores as
for any row. A row is joined only when its shards answer every question of the row, each once;
otherwise the table says which shards are there. Only tables that carry rows (``Table.carries_rows``)
join them: the others read more of each question than a record keeps.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from dynrag.datasets.shard import Shard
from dynrag.reproduce.carried_rows import carried_summary
from dynrag.reproduce.record_build import data_files, table_record_id
from dynrag.reproduce.records import load_record
from dynrag.reproduce.runs import ReproduceRequest, run_dir
from dynrag.reproduce.tables import RunSpec, records_of
from dynrag.reproduce.world_tests import mcc_of



def joined_cells(records: list[dict[str, Any]], wall_seconds: float | None) -> dict[str, Any]:
    """A summary's figures (the keys `reproduce` tables read) from per-question records: means of
    EM, F1, accuracy and retrievals, the world's question MCC (did not retrieve against needed
    nothing) and the wall time a question."""
    n = len(records)
    summary: dict[str, Any] = {"n": n}
    for key, name in (("em", "em"), ("f1", "f1"), ("accuracy", "accuracy"), ("retrievals", "retrievals_per_question")):
        values = [r[key] for r in records if isinstance(r.get(key), (int, float))]
        if values and len(values) == n:
            summary[name] = float(np.mean(values))
    decided = [r for r in records if r.get("needs_retrieval") is not None]
    if decided:
        predicted = np.asarray([int(r["retrievals"]) == 0 for r in decided], bool)
        truth = np.asarray([not r["needs_retrieval"] for r in decided], bool)
        summary["retrieval_decisions"] = {"mcc": mcc_of(predicted, truth)}
    summary["wall_seconds"] = wall_seconds
    summary["wall_seconds_per_question"] = wall_seconds / n if wall_seconds is not None and n else None
    return summary


def _question_ids(report: dict[str, Any], spec: RunSpec) -> list[str]:
    """The ids of every question of the row, in file order (after --limit)."""
    from dynrag.datasets.loaders import load_examples

    req: ReproduceRequest = report["request"]
    path = report["data"][spec.dataset]
    return [str(ex.id) for ex in load_examples(spec.reader or spec.dataset, path, skip_bad=req.skip_bad, limit=req.limit)]


def _from_run_dirs(req: ReproduceRequest, spec: RunSpec) -> dict[int, dict[int, tuple[dict[str, Any], str]]]:
    """count -> index -> (summary, where) for every shard run directory of the row with a summary."""
    whole = run_dir(req, spec)
    found: dict[int, dict[int, tuple[dict[str, Any], str]]] = {}
    for path in sorted(whole.parent.glob(f"{whole.name}-shard*of*")):
        shard = Shard.ending(path.name)
        summary_path = path / "summary.json"
        if shard and summary_path.is_file() and path.name == f"{whole.name}-{shard.slug}":
            summary = json.loads(summary_path.read_text(encoding="utf-8"))
            summary["run_dir"] = str(path)
            found.setdefault(shard.count, {})[shard.index] = (summary, str(path))
    return found


def _record_prefixes(report: dict[str, Any], spec: RunSpec) -> list[str]:
    """The ids (without their shard part) a shard record of the row may have: the whole table's or
    the row's alone (``--row KEY``), of the command's datasets or of the row's alone."""
    req: ReproduceRequest = report["request"]
    ids = []
    for rows in (None, [spec.key]):
        for datasets in (report.get("datasets"), [spec.dataset]):
            variant = {**report, "request": req.model_copy(update={"rows": rows, "shard": None}),
                       "datasets": datasets, "data": {ds: p for ds, p in report["data"].items() if ds in datasets}}
            ids.append(table_record_id(variant))
    return list(dict.fromkeys(ids))


def _from_records(report: dict[str, Any], spec: RunSpec, directory: Path,
                  notes: list[str]) -> dict[int, dict[int, tuple[dict[str, Any], str]]]:
    """count -> index -> (summary, where) for every shard record of the row in ``directory`` whose
    data files are this command's and that kept the row's per-question scores."""
    found: dict[int, dict[int, tuple[dict[str, Any], str]]] = {}
    _, data_sha = data_files(report["request"], {spec.dataset: report["data"][spec.dataset]})
    for prefix in _record_prefixes(report, spec):
        for path in sorted(directory.glob(f"{prefix}.shard*of*.json")):
            shard = Shard.ending(path.stem)
            if not shard or path.stem != f"{prefix}.{shard.slug}":
                continue
            record = load_record(path)
            recorded_sha = dict(zip(record.datasets, (record.provenance.data_sha256 or "").split(", "))).get(spec.dataset)
            if recorded_sha != data_sha:
                notes.append(f"{spec.dataset} {spec.label}: shard record {path.name} not used: its data files' sha256 "
                             "differ from this command's")
                continue
            row = next((r for r in record.rows if (r.dataset, r.key) == (spec.dataset, spec.key) and r.scores.get("em")), None)
            if row is not None:
                summary = carried_summary(record, row)
                found.setdefault(shard.count, {}).setdefault(shard.index, (summary, path.name))
    return found


def join_shards(report: dict[str, Any], directory: Path | None) -> list[str]:
    """Fill each row of ``report`` without a result from its shards (run directories under
    ``--out``, else records in ``directory``); a note per row joined or found incomplete."""
    req: ReproduceRequest = report["request"]
    table = report["table"]
    missing = [key for key, summary in report["results"].items() if summary is None]
    if not missing or req.shard or not table.carries_rows:
        return []
    by_key = {(s.dataset, s.key): s for s in table.runs}
    notes: list[str] = []
    joined: list[str] = []
    for key in missing:
        spec = by_key[key]
        found = _from_run_dirs(req, spec)
        if directory is not None and Path(directory).is_dir():
            for count, parts in _from_records(report, spec, Path(directory), notes).items():
                for index, part in parts.items():
                    found.setdefault(count, {}).setdefault(index, part)  # a run directory wins over a record
        if not found:
            continue
        count = max(found, key=lambda k: (len(found[k]) == k, len(found[k]) / k))
        parts = found[count]
        absent = [i for i in range(1, count + 1) if i not in parts]
        if absent:
            notes.append(f"{spec.dataset} {spec.label}: shard{'s' * (len(parts) > 1)} {', '.join(map(str, sorted(parts)))} of {count} found; "
                         f"{', '.join(map(str, absent))} not yet run")
            continue
        summary, why = _join(report, spec, [parts[i] for i in range(1, count + 1)])
        if summary is None:
            notes.append(f"{spec.dataset} {spec.label}: not joined: {why}")
            continue
        report["results"][key] = summary
        joined.append(f"{spec.dataset} {spec.label} ({why})")
        notes.append(f"{spec.dataset} {spec.label}: joined from {why}")
    if joined:
        table.remarks = [*table.remarks, f"Rows joined from their shards (cells from the shards' per-question scores, "
                         f"wall time their sum): {'; '.join(joined)}."]
    return notes


def _join(report: dict[str, Any], spec: RunSpec,
          parts: list[tuple[dict[str, Any], str]]) -> tuple[dict[str, Any] | None, str]:
    """(the joined summary, where its shards came from), or (None, why not)."""
    ids = _question_ids(report, spec)
    count = len(parts)
    by_id: dict[str, dict[str, Any]] = {}
    for index, (summary, where) in enumerate(parts, 1):
        expected = {ids[p] for p in Shard(index, count).positions(len(ids))}
        records = {str(r["id"]): r for r in records_of(summary) or []}
        if set(records) != expected:
            short = len(expected - set(records))
            return None, (f"shard {index}/{count} ({where}) answers {len(set(records) & expected)} of its "
                          f"{len(expected)} questions" + (f" ({short} missing)" if short else " and others"))
        by_id.update(records)
    walls = [summary.get("wall_seconds") for summary, _ in parts]
    wall = float(sum(walls)) if all(isinstance(w, (int, float)) for w in walls) else None
    records = [by_id[q] for q in ids]
    summary = joined_cells(records, wall)
    summary["question_records"] = records
    where = f"{count} shards: " + ", ".join(w if "/" not in w else Path(w).name for _, w in parts)
    summary["carried_from"] = where
    return summary, where
