"""IIRC: a JSON list of articles ``{title, text, questions [{qid, question, answer {type,
answer_spans [{text}], answer_value, answer_unit}, context [{passage, text}]}]}``. Answer type
``none`` (unanswerable) is excluded and counted; ``span`` gives the span texts; ``value`` and
``binary`` give ``answer_value`` (plus "value unit" as an alias). Contexts: the article's main
text (when present) and each gold context snippet (titled by its ``passage``, "main" meaning
the article); the snippets are the supporting passages."""

from __future__ import annotations

from typing import Any

from dynrag.datasets.formats.registry import DATASETS, Dataset, ParseContext
from dynrag.datasets.formats.fields import answers, as_object, first_id, required, required_text
from dynrag.datasets.examples import QAExample, make_passage
from dynrag.datasets.records import BadRecord, iter_json_array
from dynrag.registry import Options


def iirc_answers(answer: Any) -> list[str] | None:
    """Gold answers of an IIRC answer object; None for an unanswerable question."""
    if not isinstance(answer, dict):
        raise BadRecord("field 'answer' must be an object")
    kind = answer.get("type")
    if kind == "none":
        return None
    if kind == "span":
        spans = answer.get("answer_spans")
        if not isinstance(spans, list) or not all(isinstance(s, dict) and isinstance(s.get("text"), str) for s in spans):
            raise BadRecord("answer_spans must be a list of {text}")
        return answers(s["text"] for s in spans)
    if kind in ("value", "binary"):
        value = answer.get("answer_value")
        if value is None or isinstance(value, (dict, list)):
            raise BadRecord(f"answer of type {kind!r} has no answer_value")
        value = str(value).strip()
        unit = str(answer.get("answer_unit") or "").strip()
        return answers([value], [f"{value} {unit}"] if unit else [])
    raise BadRecord(f"unknown answer type {kind!r}")


def parse_iirc(record: Any, ctx: ParseContext) -> list[QAExample]:
    as_object(record)
    title = str(required(record, "title"))
    questions = required(record, "questions")
    if not isinstance(questions, list):
        raise BadRecord("field 'questions' must be a list")
    main = record.get("text")
    main_passage = make_passage(title, main) if isinstance(main, str) and main.strip() else None
    out: list[QAExample] = []
    for qi, q in enumerate(questions):
        try:
            gold = iirc_answers(required(q, "answer"))
            if gold is None:
                ctx.report.exclude("unanswerable (IIRC answer type 'none')")
                continue
            qid = first_id(q, "qid", "id")
            snippets = []
            for ci, item in enumerate(q.get("context") or []):
                if not isinstance(item, dict) or not isinstance(item.get("text"), str):
                    raise BadRecord(f"context[{ci}] needs a 'text' string")
                if item["text"].strip():
                    source = str(item.get("passage") or "main")
                    snippets.append(make_passage(title if source == "main" else source, item["text"]))
            contexts = ([main_passage] if main_passage else []) + snippets
            supporting = list(dict.fromkeys(p.id for p in snippets))
            gold = answers(gold, ctx.aliases.get(qid, []))
            out.append(QAExample(qid, required_text(q, "question"), gold, contexts, supporting))
        except BadRecord as exc:
            raise BadRecord(f"questions[{qi}]: {exc}") from exc
    return out


@DATASETS.register("iirc", summary="IIRC JSON list of articles; unanswerable questions excluded")
def iirc(options: Options) -> Dataset:
    return Dataset("iirc", iter_json_array, parse_iirc, default_files=("iirc/dev.json",))
