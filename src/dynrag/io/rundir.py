"""The run directory's files: config.json, config.yaml, predictions.jsonl, summary.json, summary.md.

config.json identifies the run (every input that decides the answers, resolved, with checksums):
a second command into the same directory resumes only when it resolves to the same. config.yaml
is the same run as a ``dynrag.config.RunConfig`` file, for ``dynrag eval --config RUN/config.yaml``.

predictions.jsonl is append-only (``dynrag.io.jsonl.JsonlAppender``): each record is written as one
line in a single write, then flushed and fsynced, so a crash leaves at most one unterminated last
line. Reading (``dynrag.io.jsonl.read_jsonl``) drops such a line (and truncates it away) so the question
is answered again, exactly once.

One writer at a time: whatever writes a run directory holds ``lock_run(DIR)`` (an flock on
DIR/.lock, see ``dynrag.io.lock.DirectoryLock``) from before it reads predictions.jsonl until the
summary is written. However the questions are answered (one after another, by threads, by worker
processes or a Dask cluster), only the coordinating process holds the lock and appends records,
so a second command on the same directory fails at once naming the holder's pid, and the lock
dies with its holder (kill -9 included). A file damaged before the lock existed (two writers at
once) holds some ids twice: ``deduplicate_predictions`` keeps the first record of each id.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dynrag.errors import ConfigError, DataError
from dynrag.io.files import atomic_write_json, atomic_write_text, read_json
from dynrag.io.jsonl import JsonlAppender, json_line, read_jsonl
from dynrag.io.lock import DirectoryLock

CONFIG, PREDICTIONS, SUMMARY_JSON, SUMMARY_MD = "config.json", "predictions.jsonl", "summary.json", "summary.md"
CONFIG_YAML = "config.yaml"
LOCK = ".lock"
RANKINGS = "rankings.jsonl"
CONTEXTS_INDEX = "contexts-index"  # the pooled index (eval/pool.py), in runs of either kind

# A run directory records its kind in the "format" of its config.json.
EVAL_RUN_FORMAT = "dynrag-run/1"
RETRIEVAL_RUN_FORMAT = "dynrag-retrieval-run/1"
RUN_KINDS = {EVAL_RUN_FORMAT: "eval", RETRIEVAL_RUN_FORMAT: "eval-retrieval"}


def _scratch(name: str) -> bool:
    """The lock file and the hidden temporaries of atomic writes and builds."""
    return name == LOCK or (name.startswith(".") and (".build-" in name or ".old-" in name or name.endswith(".tmp")))


def run_kind(run_dir: Path) -> str | None:
    """What ``run_dir`` holds: None (missing, empty, or only an unfinished run's pooled index),
    "eval" or "eval-retrieval" (read from config.json's format; an eval-retrieval directory
    written before it had a config.json is known by its rankings.jsonl), or "index" (a
    ``dynrag index`` directory). Anything else is a ConfigError naming a few of its files."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        return None
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: exists and is not a directory; choose another --out")
    names = sorted(e.name for e in run_dir.iterdir() if not _scratch(e.name))
    if not names or names == [CONTEXTS_INDEX]:
        return None
    config = read_config(run_dir)
    if config is not None:
        kind = RUN_KINDS.get(config.get("format"))  # type: ignore[arg-type]
        if kind is None:
            raise ConfigError(
                f"{run_dir / CONFIG}: format {config.get('format')!r} is not a dynrag run "
                f"({', '.join(RUN_KINDS)}); choose another --out"
            )
        return kind
    if RANKINGS in names and SUMMARY_JSON in names:
        return "eval-retrieval"
    if PREDICTIONS in names:
        return "eval"  # open_run says what is missing
    manifest = run_dir / "manifest.json"
    if manifest.is_file() and "dynrag-" in manifest.read_text(encoding="utf-8", errors="replace")[:400]:
        return "index"
    shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    raise ConfigError(
        f"{run_dir}: is not empty and is not a dynrag run directory (it holds {shown}); "
        "choose another --out, or empty it"
    )


def check_run_dir(run_dir: Path, kind: str) -> None:
    """Refuse a ``--out`` holding a run of another kind, an index, or unrelated files: a
    command writes only into a new or empty directory or a run of its own kind."""
    found = run_kind(run_dir)
    if found is None or found == kind:
        return
    if found == "index":
        raise ConfigError(
            f"{run_dir}: is an index directory (dynrag index), not a run directory; choose another --out"
        )
    raise ConfigError(
        f"{run_dir}: holds a `dynrag {found}` run, which `dynrag {kind}` would overwrite; "
        "choose another --out"
    )


def read_config(run_dir: Path) -> dict[str, Any] | None:
    path = Path(run_dir) / CONFIG
    if not path.exists():
        return None
    data = read_json(path, "run config")
    if not isinstance(data, dict):
        raise DataError(str(path), "run config must be a JSON object")
    return data


def read_eval_config(run_dir: Path, what: str) -> dict[str, Any]:
    """config.json of an eval run; ``what`` (e.g. "--baseline DIR") starts the error otherwise."""
    config = read_config(run_dir)
    if config is None:
        raise ConfigError(f"{what}: not a run directory (no config.json)")
    kind = RUN_KINDS.get(config.get("format"))  # type: ignore[arg-type]
    if kind != "eval":
        raise ConfigError(f"{what}: {'a `dynrag ' + kind + '` run' if kind else 'not a dynrag run'}, not a `dynrag eval` run")
    return config


def config_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Keys whose values differ, each as `key: old -> new`."""
    diffs = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            diffs.append(f"{key}: {json.dumps(old.get(key))} -> {json.dumps(new.get(key))}")
    return diffs


def open_run(run_dir: Path, config: dict[str, Any], option_defaults: dict[str, Any] | None = None) -> str | None:
    """Create the run directory with config.json, or check an existing one has the same config.

    ``option_defaults`` are the method's option defaults: an option missing from an older
    config.json (added to the method since) is taken to have had its default. A run that has
    not answered any question yet (its first command failed after writing config.json, e.g.
    loading the model) takes the new config: nothing is lost. Returns a note saying so, else None.
    Call it holding ``lock_run``."""
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
    if "scorer" not in old:  # written before the scorer was a choice: SQuAD-style
        old = {**old, "scorer": "squad"}
    if option_defaults and isinstance(old.get("options"), dict):
        old = {**old, "options": {**option_defaults, **old["options"]}}
    diffs = config_differences(old, config)
    if diffs and not read_predictions(run_dir):
        atomic_write_json(run_dir / CONFIG, config)
        return f"{run_dir}: no question answered yet, so it takes the new config ({'; '.join(diffs)})"
    if diffs:
        raise ConfigError(
            f"{run_dir} holds a run with a different config ({'; '.join(diffs)}); "
            "use another --out, or the same options to resume"
        )
    return None


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


@contextmanager
def lock_run(run_dir: Path) -> Iterator[DirectoryLock]:
    """Hold the run directory (created if missing) for this process inside the ``with`` block;
    a second holder fails at once with a ``LockedError`` naming this process's pid. The OS drops
    the lock when the process dies, however it dies."""
    lock = DirectoryLock(run_dir, what="run directory").acquire()
    try:
        yield lock
    finally:
        lock.release()


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


@dataclass(frozen=True)
class Resumed:
    """What a run directory already holds when a question loop starts (or resumes) over it."""

    done: list[dict[str, Any]]  # one record per answered id, in file order
    dropped: int  # later records of an id already answered (two writers once appended at once)

    def messages(self, run_dir: Path, total: int) -> list[str]:
        said = []
        if self.dropped:
            said.append(f"{Path(run_dir) / PREDICTIONS}: held {self.dropped} duplicate record(s) (two runs wrote it at "
                        "once?); kept the first record of each question and rewrote the file")
        if self.done:
            said.append(f"resuming {run_dir}: {len(self.done)} of {total} questions already answered")
        return said


def resume_records(run_dir: Path, ids: Iterable[str]) -> Resumed:
    """The start of every resumable question loop, holding ``lock_run``: the records already written
    (a torn last line cut away, each id's first record kept and the file rewritten if it held
    duplicates). Records of ids not among ``ids`` mean the directory belongs to other questions."""
    done, dropped = deduplicate_predictions(run_dir, read_predictions(run_dir, repair=True))
    wanted = set(ids)
    stray = [r["id"] for r in done if r["id"] not in wanted]
    if stray:
        raise DataError(str(Path(run_dir) / PREDICTIONS), f"holds ids not in this dataset (e.g. {stray[0]!r})")
    return Resumed(done, dropped)


class PredictionWriter(JsonlAppender):
    """Appends one record per line; each is on disk (fsynced) before the next question starts."""

    def __init__(self, run_dir: Path):
        super().__init__(Path(run_dir) / PREDICTIONS)
