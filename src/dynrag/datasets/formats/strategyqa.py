"""StrategyQA: a JSON list of ``{qid, question, answer (bool), facts}``; gold answers ["yes"] or
["no"]. Its ``facts`` serve as the context passages (no title) and are all supporting; the
Wikipedia paragraphs its ``evidence`` ids point to are not part of the release."""

from __future__ import annotations

from typing import Any

from dynrag.datasets.formats.registry import DATASETS, Dataset, ParseContext
from dynrag.datasets.formats.fields import as_object, first_id, required, required_text, string_list
from dynrag.datasets.decomposition import strategyqa_decomposition
from dynrag.datasets.examples import QAExample, make_passage
from dynrag.datasets.records import BadRecord, iter_json_array
from dynrag.registry import Options


def parse_strategyqa(record: Any, ctx: ParseContext) -> list[QAExample]:
    as_object(record)
    qid = first_id(record, "qid", "id")
    answer = required(record, "answer")
    if not isinstance(answer, bool):
        raise BadRecord(f"field 'answer' must be true or false, got {answer!r}")
    facts = string_list(record.get("facts") or [], "field 'facts'")
    contexts = [make_passage("", f) for f in facts if f.strip()]
    ids = list(dict.fromkeys(p.id for p in contexts))
    decomposition = strategyqa_decomposition(record.get("decomposition"))
    return [QAExample(qid, required_text(record, "question"), ["yes" if answer else "no"], contexts, ids, decomposition)]


@DATASETS.register("strategyqa", summary="StrategyQA JSON list; yes/no answers, facts as contexts")
def strategyqa(options: Options) -> Dataset:
    return Dataset("strategyqa", iter_json_array, parse_strategyqa, yes_no=True, decomposes=True,
                   default_files=("strategyqa/strategyqa_train.json",))  # DRAGIN's code evaluates on StrategyQA train
