"""The generic format: JSONL of ``{id, question, answers}`` (``answers`` a list or a string, or
``answer``); optional ``contexts`` as ``[{title, text, supporting}]`` or plain strings."""

from __future__ import annotations

from typing import Any

from dynrag.datasets.formats.registry import DATASETS, Dataset, ParseContext
from dynrag.datasets.formats.fields import answers, as_object, generic_contexts, required_text, string_list
from dynrag.datasets.examples import QAExample
from dynrag.datasets.records import BadRecord, iter_jsonl
from dynrag.registry import Options


def parse_jsonl(record: Any, ctx: ParseContext) -> list[QAExample]:
    as_object(record)
    qid = required_text(record, "id")
    raw = record.get("answers") if record.get("answers") is not None else record.get("answer")
    if raw is None:
        raise BadRecord("missing field 'answers'")
    gold = answers(string_list(raw, "field 'answers'"), ctx.aliases.get(qid, []))
    contexts, supporting = generic_contexts(record.get("contexts") or [], "contexts")
    return [QAExample(qid, required_text(record, "question"), gold, contexts, supporting)]


@DATASETS.register("jsonl", summary="generic JSONL {id, question, answers[, contexts]}")
def jsonl(options: Options) -> Dataset:
    return Dataset("jsonl", iter_jsonl, parse_jsonl, exemplars="default")
