"""HotpotQA and 2WikiMultihopQA: a JSON list of ``{_id, question, answer, supporting_facts [[title,
sent]], context [[title, [sentences]]]}`` (2Wiki adds ``answer_id`` and ``evidences``). One passage
per context paragraph (sentences joined); supporting = the paragraphs whose title is in
``supporting_facts``. 2Wiki aliases (``--aliases``) are keyed by question ``_id`` or ``answer_id``."""

from __future__ import annotations

from typing import Any

from dynrag.corpus.passage import Passage
from dynrag.datasets.formats.registry import DATASETS, Dataset, DeepRAGLimits, ParseContext
from dynrag.datasets.formats.fields import answers, as_object, first_id, required, required_text
from dynrag.datasets.decomposition import evidence_decomposition
from dynrag.datasets.examples import QAExample, make_passage
from dynrag.datasets.records import BadRecord, list_or_lines
from dynrag.registry import Options


def titled_paragraphs(record: Any) -> tuple[list[Passage], list[str]]:
    """HotpotQA/2Wiki ``context`` [[title, [sentences]]] with ``supporting_facts`` [[title, i]]."""
    context = required(record, "context")
    if not isinstance(context, list):
        raise BadRecord("field 'context' must be a list of [title, sentences]")
    passages: list[Passage] = []
    titles: list[str] = []
    for i, item in enumerate(context):
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str)):
            raise BadRecord(f"context[{i}] must be [title, sentences]")
        sentences = item[1]
        if isinstance(sentences, str):
            sentences = [sentences]
        if not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
            raise BadRecord(f"context[{i}] sentences must be a list of strings")
        text = " ".join(sentences)
        if text.strip():
            passages.append(make_passage(item[0], text))
            titles.append(" ".join(item[0].split()))
    facts = record.get("supporting_facts") or []
    if not isinstance(facts, list):
        raise BadRecord("field 'supporting_facts' must be a list of [title, sentence]")
    support_titles = {" ".join(str(f[0]).split()) for f in facts if isinstance(f, (list, tuple)) and f}
    supporting = [p.id for p, t in zip(passages, titles) if t in support_titles]
    return passages, list(dict.fromkeys(supporting))


def parse_hotpotqa(record: Any, ctx: ParseContext) -> list[QAExample]:
    as_object(record)
    qid = first_id(record, "_id", "id")
    contexts, supporting = titled_paragraphs(record)
    gold = answers([required_text(record, "answer")], ctx.aliases.get(qid, []))
    return [QAExample(qid, required_text(record, "question"), gold, contexts, supporting)]


def parse_2wiki(record: Any, ctx: ParseContext) -> list[QAExample]:
    as_object(record)
    qid = first_id(record, "_id", "id")
    answer_id = str(record.get("answer_id") or "")
    extra = ctx.aliases.get(qid) or (ctx.aliases.get(answer_id, []) if answer_id else [])
    contexts, supporting = titled_paragraphs(record)
    gold = answers([required_text(record, "answer")], extra)
    decomposition = evidence_decomposition(record.get("evidences"))
    return [QAExample(qid, required_text(record, "question"), gold, contexts, supporting, decomposition)]


@DATASETS.register("hotpotqa", summary="HotpotQA JSON list (or one record a line); context paragraphs (distractor setting)")
def hotpotqa(options: Options) -> Dataset:
    # The authors' depth on HotpotQA: its questions have two hops.
    return Dataset("hotpotqa", list_or_lines, parse_hotpotqa, deeprag=DeepRAGLimits(max_retrievals=6, max_steps=6),
                   default_files=("hotpotqa/hotpot_dev_distractor_sample.json",))


@DATASETS.register("2wikimultihopqa", summary="2WikiMultihopQA JSON list (or one record a line); --aliases adds answer aliases")
def twowiki(options: Options) -> Dataset:
    return Dataset("2wikimultihopqa", list_or_lines, parse_2wiki, decomposes=True, aliases=True, whole_text_fallback=True,
                   default_files=("2wikimultihopqa/dev_sample.json",))
