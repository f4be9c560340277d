"""MuSiQue: JSONL of ``{id, question, answer, answer_aliases, paragraphs [{idx, title,
paragraph_text, is_supporting}]}``. Every record is kept (``answerable`` is not filtered)."""

from __future__ import annotations

from typing import Any

from dynrag.datasets.formats.registry import DATASETS, Dataset, ParseContext
from dynrag.datasets.formats.fields import answers, as_object, generic_contexts, required, required_text, string_list
from dynrag.datasets.decomposition import musique_decomposition
from dynrag.datasets.examples import QAExample
from dynrag.datasets.records import list_or_lines
from dynrag.registry import Options


def parse_musique(record: Any, ctx: ParseContext) -> list[QAExample]:
    as_object(record)
    qid = required_text(record, "id")
    alias_list = string_list(record.get("answer_aliases") or [], "field 'answer_aliases'")
    contexts, supporting = generic_contexts(required(record, "paragraphs"), "paragraphs", "paragraph_text")
    gold = answers([required_text(record, "answer")], alias_list + ctx.aliases.get(qid, []))
    decomposition = musique_decomposition(record.get("question_decomposition"))
    return [QAExample(qid, required_text(record, "question"), gold, contexts, supporting, decomposition)]


@DATASETS.register("musique", summary="MuSiQue JSONL (or a JSON list) with paragraphs")
def musique(options: Options) -> Dataset:
    return Dataset("musique", list_or_lines, parse_musique, decomposes=True,
                   default_files=("musique/musique_ans_dev_sample.jsonl",))
