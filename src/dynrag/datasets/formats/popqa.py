"""PopQA: the released TSV (header with ``id, question, possible_answers`` where ``possible_answers``
is a JSON list in a string), or JSON / JSONL records with ``question`` and ``possible_answers``
(list or JSON string) or ``answers``; optional ``ctxs [{title, text}]`` become contexts. No
supporting passages."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dynrag.datasets.formats.registry import DATASETS, Dataset, ParseContext
from dynrag.datasets.formats.fields import answers, as_object, generic_contexts, required, required_text, string_list
from dynrag.datasets.examples import QAExample
from dynrag.datasets.records import BadRecord, first_char, iter_json_array, iter_jsonl, iter_tsv
from dynrag.errors import json_problem
from dynrag.registry import Options


def read_popqa(path: Path) -> Iterator[tuple[int, int, Any]]:
    """TSV by extension, else a JSON list or JSONL by the first character."""
    if path.suffix.lower() in (".tsv", ".txt"):
        return iter_tsv(path)
    return iter_json_array(path) if first_char(path) == "[" else iter_jsonl(path)


def popqa_answers(record: Any) -> list[str]:
    raw = record.get("possible_answers") if isinstance(record, dict) else None
    if raw is None:
        raw = required(record, "answers")
    if isinstance(raw, str):
        text = raw.strip()
        if text.startswith("["):
            try:
                raw = json.loads(text)
            except json.JSONDecodeError as exc:
                raise BadRecord(f"possible_answers: {json_problem(exc)}") from exc
    return string_list(raw, "possible_answers")


def parse_popqa(record: Any, ctx: ParseContext) -> list[QAExample]:
    as_object(record)
    qid = str(record.get("id") if record.get("id") is not None else "").strip() or str(ctx.index)
    contexts = generic_contexts(record.get("ctxs") or [], "ctxs")[0]
    gold = answers(popqa_answers(record), ctx.aliases.get(qid, []))
    return [QAExample(qid, required_text(record, "question"), gold, contexts, [])]


@DATASETS.register("popqa", summary="PopQA TSV, JSON or JSONL; optional ctxs")
def popqa(options: Options) -> Dataset:
    return Dataset("popqa", read_popqa, parse_popqa, exemplars="default",
                   default_files=("popqa/popqa.jsonl", "popqa/popqa_dev_300.jsonl"))
