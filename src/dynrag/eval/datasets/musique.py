"""MuSiQue: JSONL of ``{id, question, answer, answer_aliases, paragraphs [{idx, title,
paragraph_text, is_supporting}]}``. Every record is kept (``answerable`` is not filtered)."""

from __future__ import annotations

from typing import Any

from dynrag.eval.datasets import DATASETS, Dataset, ParseContext
from dynrag.eval.datasets.fields import answers, as_object, required, required_text, string_list
from dynrag.eval.examples import QAExample, make_passage
from dynrag.eval.records import BadRecord, iter_jsonl
from dynrag.registry import Options


def parse_musique(record: Any, ctx: ParseContext) -> list[QAExample]:
    as_object(record)
    qid = required_text(record, "id")
    alias_list = string_list(record.get("answer_aliases") or [], "field 'answer_aliases'")
    paragraphs = required(record, "paragraphs")
    if not isinstance(paragraphs, list):
        raise BadRecord("field 'paragraphs' must be a list")
    contexts = []
    supporting = []
    for i, para in enumerate(paragraphs):
        if not isinstance(para, dict) or not isinstance(para.get("paragraph_text"), str):
            raise BadRecord(f"paragraphs[{i}] needs a 'paragraph_text' string")
        if not para["paragraph_text"].strip():
            continue
        p = make_passage(str(para.get("title") or ""), para["paragraph_text"])
        contexts.append(p)
        if para.get("is_supporting") is True:
            supporting.append(p.id)
    gold = answers([required_text(record, "answer")], alias_list + ctx.aliases.get(qid, []))
    return [QAExample(qid, required_text(record, "question"), gold, contexts, list(dict.fromkeys(supporting)))]


@DATASETS.register("musique", summary="MuSiQue JSONL with paragraphs")
def musique(options: Options) -> Dataset:
    return Dataset("musique", iter_jsonl, parse_musique)
