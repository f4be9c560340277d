"""The run directory's files: config.json, config.yaml, predictions.jsonl, summary.json, summary.md.

config.json identifies the run (every input that decides the answers, resolved, with checksums):
a second command into the same directory resumes only when it resolves to the same. config.yaml
is the same run as a ``dynrag.config.RunConfig`` file, for ``dynrag eval --config RUN/config.yaml``.

predictions.jsonl is append-only (``dynrag.io.JsonlAppender``): each record is written as one
line in a single write, then flushed and fsynced, so a crash leaves at most one unterminated last
line. Reading (``dynrag.io.read_jsonl``) drops such a line (and truncates it away) so the question
is answered again, exactly once.

One writer at a time: whatever writes a run directory holds ``lock_run(DIR)`` (an flock on
DIR/.lock, see ``dynrag.io.DirectoryLock``) from before it reads predictions.jsonl until the
summary is written. However the questions are answered (one after another, by threads, by worker
processes or a Dask cluster), only the coordinating process holds the lock and appends records,
so a second command on the same directory fails at once naming the holder's pid, and the lock
dies with its holder (kill -9 included). A file damaged before the lock existed (two writers at
once) holds some ids twice: ``deduplicate_predictions`` keeps the first record of each id.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dynrag.errors import ConfigError, DataError
from dynrag.io import DirectoryLock, JsonlAppender, atomic_write_json, atomic_write_text, json_line, read_jsonl

CONFIG, PREDICTIONS, SUMMARY_JSON, SUMMARY_MD = "config.json", "predictions.jsonl", "summary.json", "summary.md"
CONFIG_YAML = "config.yaml"


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


def open_run(run_dir: Path, config: dict[str, Any], option_defaults: dict[str, Any] | None = None) -> None:
    """Create the run directory with config.json, or check an existing one has the same config.

    ``option_defaults`` are the method's option defaults: an option missing from an older
    config.json (added to the method since) is taken to have had its default."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: exists and is not a directory; choose another --out")
    old = read_config(run_dir)
    if old is None:
        if (run_dir / PREDICTIONS).exists():
            raise ConfigError(f"{run_dir}: has {PREDICTIONS} but no {CONFIG}; choose another --out")
        atomic_write_json(run_dir / CONFIG, config)
        return
    if "retriever" not in old:  # written before the retriever was a choice: it was bm25
        retrieving = old.get("corpus") is not None
        old = {**old, "retriever": "bm25" if retrieving else None, "retriever_options": {} if retrieving else None}
    if option_defaults and isinstance(old.get("options"), dict):
        old = {**old, "options": {**option_defaults, **old["options"]}}
    diffs = config_differences(old, config)
    if diffs:
        raise ConfigError(
            f"{run_dir} holds a run with a different config ({'; '.join(diffs)}); "
            "use another --out, or the same options to resume"
        )


def write_run_yaml(run_dir: Path, run: dict[str, Any]) -> None:
    """config.yaml: the run as a configuration file that `dynrag eval --config` reads back."""
    import yaml

    header = (
        "# The resolved configuration of this run. `dynrag eval --config THIS_FILE` resumes it here;\n"
        "# with `--out OTHER_DIR` it runs the same evaluation again. Keys: docs/evaluation.md.\n"
    )
    body = yaml.safe_dump(run, sort_keys=False, allow_unicode=True, default_flow_style=False)
    atomic_write_text(Path(run_dir) / CONFIG_YAML, header + body)


def _prediction_problem(record: Any) -> str | None:
    if isinstance(record, dict) and "id" in record:
        return None
    return "not a prediction record (the file was edited?)"


def read_predictions(run_dir: Path, repair: bool = False) -> list[dict[str, Any]]:
    """The finished records. An unterminated or undecodable *last* line is a write cut short by a
    crash: it is dropped (and with ``repair`` cut from the file). A bad line elsewhere is an error."""
    return read_jsonl(Path(run_dir) / PREDICTIONS, repair=repair, validate=_prediction_problem)


def lock_run(run_dir: Path) -> DirectoryLock:
    """Hold the run directory for this process (created if missing) until ``release`` or exit;
    a second holder fails at once with a ``LockedError`` naming this process's pid."""
    return DirectoryLock(run_dir, what="run directory").acquire()


def unique_by_id(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The first record of each id, in file order, and how many later ones were dropped."""
    seen: set[str] = set()
    kept = []
    for record in records:
        if record["id"] not in seen:
            seen.add(record["id"])
            kept.append(record)
    return kept, len(records) - len(kept)


def deduplicate_predictions(run_dir: Path, records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """``unique_by_id`` of the records read from predictions.jsonl; when some id was there twice
    the file is rewritten (atomically) with the kept records. Call it holding ``lock_run``."""
    kept, dropped = unique_by_id(records)
    if dropped:
        atomic_write_text(Path(run_dir) / PREDICTIONS, "".join(json_line(r) for r in kept))
    return kept, dropped


class PredictionWriter(JsonlAppender):
    """Appends one record per line; each is on disk (fsynced) before the next question starts."""

    def __init__(self, run_dir: Path):
        super().__init__(Path(run_dir) / PREDICTIONS)
