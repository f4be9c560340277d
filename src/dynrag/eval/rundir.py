"""The run directory's files: config.json, predictions.jsonl, summary.json and summary.md.

predictions.jsonl is append-only: each record is written as one line in a single write, then
flushed and fsynced, so a crash leaves at most one unterminated last line. Reading drops such a
line (and truncates it away) so the question is answered again, exactly once.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from dynrag.errors import ConfigError, DataError

CONFIG, PREDICTIONS, SUMMARY_JSON, SUMMARY_MD = "config.json", "predictions.jsonl", "summary.json", "summary.md"


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def read_config(run_dir: Path) -> dict[str, Any] | None:
    path = Path(run_dir) / CONFIG
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(str(path), f"unreadable run config ({exc})") from exc
    if not isinstance(data, dict):
        raise DataError(str(path), "run config must be a JSON object")
    return data


def config_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Keys whose values differ, each as `key: old -> new`."""
    diffs = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            diffs.append(f"{key}: {json.dumps(old.get(key))} -> {json.dumps(new.get(key))}")
    return diffs


def open_run(run_dir: Path, config: dict[str, Any]) -> None:
    """Create the run directory with config.json, or check an existing one has the same config."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: exists and is not a directory; choose another --out")
    old = read_config(run_dir)
    if old is None:
        if (run_dir / PREDICTIONS).exists():
            raise ConfigError(f"{run_dir}: has {PREDICTIONS} but no {CONFIG}; choose another --out")
        write_json(run_dir / CONFIG, config)
        return
    if "retriever" not in old:  # written before the retriever was a choice: it was bm25
        retrieving = old.get("corpus") is not None
        old = {**old, "retriever": "bm25" if retrieving else None, "retriever_options": {} if retrieving else None}
    if "scorer" not in old:  # written before the scorer was a choice: SQuAD-style
        old = {**old, "scorer": "squad"}
    diffs = config_differences(old, config)
    if diffs:
        raise ConfigError(
            f"{run_dir} holds a run with a different config ({'; '.join(diffs)}); "
            "use another --out, or the same options to resume"
        )


def read_predictions(run_dir: Path, repair: bool = False) -> list[dict[str, Any]]:
    """The finished records. An unterminated or undecodable *last* line is a write cut short by a
    crash: it is dropped (and with ``repair`` cut from the file). A bad line elsewhere is an error."""
    path = Path(run_dir) / PREDICTIONS
    if not path.exists():
        return []
    data = path.read_bytes()
    records: list[dict[str, Any]] = []
    good_end = 0
    pos = 0
    line_no = 0
    while pos < len(data):
        line_no += 1
        nl = data.find(b"\n", pos)
        end = len(data) if nl < 0 else nl + 1
        raw = data[pos:end]
        is_last = end >= len(data)
        record = None
        if nl >= 0 and raw.strip():
            try:
                record = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                record = None
            if not isinstance(record, dict) or "id" not in record:
                record = None
        if record is None and raw.strip():
            if not is_last:
                raise DataError(str(path), "not a prediction record (the file was edited?)", line_no)
            break  # torn last write: drop it
        if record is not None:
            records.append(record)
        good_end = end
        pos = end
    if repair and good_end < len(data):
        with open(path, "r+b") as f:
            f.truncate(good_end)
            f.flush()
            os.fsync(f.fileno())
    return records


class PredictionWriter:
    """Appends one record per line; each is on disk (fsynced) before the next question starts."""

    def __init__(self, run_dir: Path):
        self._f = open(Path(run_dir) / PREDICTIONS, "a", encoding="utf-8")

    def append(self, record: dict[str, Any]) -> None:
        self._f.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> "PredictionWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
