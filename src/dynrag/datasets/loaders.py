"""Benchmark loaders: the original file formats into one ``QAExample`` record.

Each format (``datasets/``, one module each, registered in ``DATASETS``) reads its file into raw
records (``records.py``) and parses one raw record into examples; ``load_examples`` adds the file
name and line to any problem, checks ids are unique, and either stops at the first bad record
(``DataError``) or, with ``skip_bad``, counts and reports it.

Formats and the choices made are described in each module of ``datasets/`` and in docs/evaluation.md.

Context passage ids are content hashes of the whitespace-normalised (title, text), so the same
paragraph has the same id in every question and every run, and pooling dedupes on it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from dynrag.errors import DataError
from dynrag.datasets.formats import DATASETS, Dataset, ParseContext, dataset_spec
from dynrag.datasets.examples import LoadReport, QAExample, make_passage, passage_key
from dynrag.datasets.records import BadJSON, BadRecord, first_char, iter_jsonl, read_text

__all__ = [
    "DATASETS", "Dataset", "LoadReport", "QAExample", "dataset_spec", "load_aliases", "load_examples",
    "make_passage", "passage_key",
]


def load_aliases(path: Path) -> dict[str, list[str]]:
    """An alias file: a JSON object {id: [aliases]} or JSONL of {Q_id, aliases, demonyms}."""
    path = Path(path)
    if first_char(path) == "{" and _is_single_object(path):
        data = json.loads(read_text(path))
        out = {}
        for key, value in data.items():
            if not isinstance(value, (list, str)):
                raise DataError(str(path), f"aliases of {key!r} must be a list of strings")
            out[str(key)] = [value] if isinstance(value, str) else [str(v) for v in value]
        return out
    out = {}
    for line, _, rec in iter_jsonl(path):
        if isinstance(rec, BadRecord):
            raise DataError(str(path), str(rec), line)
        if not isinstance(rec, dict) or "Q_id" not in rec:
            raise DataError(str(path), "expected {Q_id, aliases, demonyms} per line", line)
        names = [str(a) for a in (rec.get("aliases") or []) + (rec.get("demonyms") or [])]
        out[str(rec["Q_id"])] = names
    return out


def _is_single_object(path: Path) -> bool:
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError:
        return False  # JSONL: several objects
    return isinstance(data, dict) and "Q_id" not in data  # a one-line official file is JSONL


def _describe(exc: Exception) -> str:
    if isinstance(exc, BadRecord):
        return str(exc)
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}"
    return f"{type(exc).__name__}: {exc}"


def load_examples(
    dataset: str,
    path: str | Path,
    *,
    aliases: dict[str, list[str]] | None = None,
    skip_bad: bool = False,
    report: LoadReport | None = None,
    limit: int | None = None,
) -> Iterator[QAExample]:
    """Yield the examples of a benchmark file in file order (streaming for JSONL/TSV).

    A malformed record raises ``DataError`` naming the file, line and record index; with
    ``skip_bad`` it is counted in ``report`` instead. Duplicate ids are malformed records.
    """
    spec = dataset_spec(dataset)
    path = Path(path)
    if not path.exists():
        raise DataError(str(path), "no such file")
    report = report if report is not None else LoadReport()
    ctx = ParseContext(aliases or {}, report)
    seen: dict[str, int] = {}
    produced = 0
    for line, index, record in spec.read(path):
        if limit is not None and produced >= limit:
            return
        try:
            if isinstance(record, BadRecord):
                raise record
            ctx.index = index
            examples = spec.parse(record, ctx)
            for ex in examples:
                if ex.id in seen:
                    raise BadRecord(f"duplicate id {ex.id!r} (first seen on line {seen[ex.id]})")
        except (BadRecord, KeyError, TypeError, ValueError, AttributeError) as exc:
            # a line that is not JSON holds no record yet: its line and column place it
            message = str(exc) if isinstance(exc, BadJSON) else f"record {index}: {_describe(exc)}"
            if not skip_bad:
                raise DataError(str(path), message, line) from exc
            report.skip(f"{path}:{line}: {message}")
            continue
        for ex in examples:
            if limit is not None and produced >= limit:
                return
            seen[ex.id] = line
            produced += 1
            yield ex
