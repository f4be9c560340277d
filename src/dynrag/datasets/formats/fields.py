"""Field helpers every benchmark parser shares: each raises ``BadRecord`` saying what is wrong."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from dynrag.corpus.passage import Passage
from dynrag.datasets.examples import make_passage
from dynrag.datasets.records import BadRecord


def as_object(record: Any) -> dict:
    if not isinstance(record, dict):
        raise BadRecord(f"expected a JSON object, got {type(record).__name__}")
    return record


def required(record: Any, key: str) -> Any:
    as_object(record)
    if key not in record or record[key] is None:
        raise BadRecord(f"missing field {key!r}")
    return record[key]


def required_text(record: Any, key: str) -> str:
    value = required(record, key)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise BadRecord(f"field {key!r} must be a string, got {type(value).__name__}")
    value = str(value).strip()
    if not value:
        raise BadRecord(f"field {key!r} is empty")
    return value


def first_id(record: Any, *keys: str) -> str:
    for key in keys:
        if isinstance(record, dict) and record.get(key) is not None:
            return required_text(record, key)
    raise BadRecord(f"missing field {keys[0]!r}")


def string_list(value: Any, what: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        raise BadRecord(f"{what} must be a list of strings")
    return [str(v) for v in value]


def answers(primary: Iterable[str], aliases: Iterable[str] = ()) -> list[str]:
    out = list(dict.fromkeys(a.strip() for a in itertools.chain(primary, aliases) if a and a.strip()))
    if not out:
        raise BadRecord("no gold answer")
    return out


def generic_contexts(items: Any, name: str, text_key: str = "text") -> tuple[list[Passage], list[str]]:
    """Context passages from ``[{title, <text_key>, supporting | is_supporting}]`` (or plain
    strings), blank ones skipped, and the ids of those marked supporting."""
    if not isinstance(items, list):
        raise BadRecord(f"field {name!r} must be a list")
    contexts, supporting = [], []
    for i, item in enumerate(items):
        if isinstance(item, str):
            item = {text_key: item}
        if not isinstance(item, dict) or not isinstance(item.get(text_key), str):
            raise BadRecord(f"{name}[{i}] needs a {text_key!r} string")
        if not item[text_key].strip():
            continue
        p = make_passage(str(item.get("title") or ""), item[text_key])
        contexts.append(p)
        if item.get("supporting") is True or item.get("is_supporting") is True:
            supporting.append(p.id)
    return contexts, list(dict.fromkeys(supporting))
