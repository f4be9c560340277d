"""Benchmark loaders: the original file formats into one ``QAExample`` record.

Each loader parses one raw record (see ``records.py``) into examples; ``load_examples`` adds the
file name and line to any problem, checks ids are unique, and either stops at the first bad
record (``DataError``) or, with ``skip_bad``, counts and reports it.

Formats and the choices made (docs/evaluation.md repeats them):

- hotpotqa: JSON list of ``{_id, question, answer, supporting_facts [[title, sent]], context
  [[title, [sentences]]]}``. One passage per context paragraph (sentences joined); supporting =
  paragraphs whose title appears in ``supporting_facts``.
- 2wikimultihopqa: the same layout (``_id, question, answer, answer_id, context,
  supporting_facts``). Optional alias file: a JSON object ``{id: [aliases]}`` keyed by question
  ``_id`` or ``answer_id``, or the official ``id_aliases.json`` (JSONL of ``{Q_id, aliases,
  demonyms}``, keyed by ``answer_id``).
- musique: JSONL of ``{id, question, answer, answer_aliases, paragraphs [{idx, title,
  paragraph_text, is_supporting}]}``. Every record is kept (``answerable`` is not filtered).
- strategyqa: JSON list of ``{qid, question, answer (bool), facts}``; gold answers ["yes"] or
  ["no"]. Its ``facts`` serve as the context passages (no title) and are all supporting; the
  Wikipedia paragraphs its ``evidence`` ids point to are not part of the release.
- iirc: JSON list of articles ``{title, text, questions [{qid, question, answer {type,
  answer_spans [{text}], answer_value, answer_unit}, context [{passage, text}]}]}``. Answer type
  ``none`` (unanswerable) is excluded and counted; ``span`` gives the span texts; ``value`` and
  ``binary`` give ``answer_value`` (plus "value unit" as an alias). Contexts: the article's main
  text (when present) and each gold context snippet (titled by its ``passage``, "main" meaning
  the article); the snippets are the supporting passages.
- popqa: the released TSV (header with ``id, question, possible_answers`` where
  ``possible_answers`` is a JSON list in a string), or JSON / JSONL records with ``question`` and
  ``possible_answers`` (list or JSON string) or ``answers``; optional ``ctxs [{title, text}]``
  become contexts. No supporting passages.
- jsonl: ``{id, question, answers}`` (``answers`` a list or a string, or ``answer``); optional
  ``contexts`` as ``[{title, text, supporting}]`` or plain strings.

Context passage ids are content hashes of the whitespace-normalised (title, text), so the same
paragraph has the same id in every question and every run, and pooling dedupes on it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dynrag.corpus.passage import Passage
from dynrag.errors import ConfigError, DataError
from dynrag.eval.decomposition import evidence_decomposition, musique_decomposition, strategyqa_decomposition
from dynrag.eval.records import BadRecord, first_char, iter_json_array, iter_jsonl, iter_tsv, read_text


@dataclass(frozen=True)
class QAExample:
    id: str
    question: str
    answers: list[str]  # gold answer first, then aliases
    contexts: list[Passage] = field(default_factory=list)
    supporting: list[str] = field(default_factory=list)  # ids of supporting passages in contexts
    # Gold sub-questions ("#k" = answer of the k-th), where the dataset has them (eval/decomposition.py).
    decomposition: list[str] = field(default_factory=list)


@dataclass
class LoadReport:
    """What loading left out: bad records (with --skip-bad) and excluded ones (e.g. unanswerable)."""

    skipped: int = 0
    messages: list[str] = field(default_factory=list)
    excluded: dict[str, int] = field(default_factory=dict)

    def skip(self, message: str) -> None:
        self.skipped += 1
        if len(self.messages) < 20:
            self.messages.append(message)

    def exclude(self, reason: str) -> None:
        self.excluded[reason] = self.excluded.get(reason, 0) + 1


def passage_key(title: str, text: str) -> str:
    """The stable id of a context paragraph: a hash of its whitespace-normalised title and text."""
    norm = " ".join(title.split()) + "\n" + " ".join(text.split())
    return "ctx-" + hashlib.sha1(norm.encode("utf-8")).hexdigest()[:16]


def make_passage(title: str, text: str) -> Passage:
    title, text = " ".join(title.split()), " ".join(text.split())
    return Passage(passage_key(title, text), title, text)


# ---- field helpers ---------------------------------------------------------------------------


def _obj(record: Any) -> dict:
    if not isinstance(record, dict):
        raise BadRecord(f"expected a JSON object, got {type(record).__name__}")
    return record


def _get(record: Any, key: str) -> Any:
    _obj(record)
    if key not in record or record[key] is None:
        raise BadRecord(f"missing field {key!r}")
    return record[key]


def _text(record: Any, key: str) -> str:
    value = _get(record, key)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise BadRecord(f"field {key!r} must be a string, got {type(value).__name__}")
    value = str(value).strip()
    if not value:
        raise BadRecord(f"field {key!r} is empty")
    return value


def _first_id(record: Any, *keys: str) -> str:
    for key in keys:
        if isinstance(record, dict) and record.get(key) is not None:
            return _text(record, key)
    raise BadRecord(f"missing field {keys[0]!r}")


def _string_list(value: Any, what: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        raise BadRecord(f"{what} must be a list of strings")
    return [str(v) for v in value]


def _answers(primary: Iterable[str], aliases: Iterable[str] = ()) -> list[str]:
    out = list(dict.fromkeys(a.strip() for a in itertools.chain(primary, aliases) if a and a.strip()))
    if not out:
        raise BadRecord("no gold answer")
    return out


def _titled_paragraphs(record: Any) -> tuple[list[Passage], list[str]]:
    """HotpotQA/2Wiki ``context`` [[title, [sentences]]] with ``supporting_facts`` [[title, i]]."""
    context = _get(record, "context")
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


# ---- per-dataset parsers (one raw record -> examples) -----------------------------------------


def parse_hotpotqa(record: Any, aliases: dict[str, list[str]]) -> list[QAExample]:
    _obj(record)
    qid = _first_id(record, "_id", "id")
    contexts, supporting = _titled_paragraphs(record)
    extra = aliases.get(qid, [])
    return [QAExample(qid, _text(record, "question"), _answers([_text(record, "answer")], extra), contexts, supporting)]


def parse_2wiki(record: Any, aliases: dict[str, list[str]]) -> list[QAExample]:
    _obj(record)
    qid = _first_id(record, "_id", "id")
    answer_id = str(record.get("answer_id") or "")
    extra = aliases.get(qid) or (aliases.get(answer_id, []) if answer_id else [])
    contexts, supporting = _titled_paragraphs(record)
    answers = _answers([_text(record, "answer")], extra)
    decomposition = evidence_decomposition(record.get("evidences"))
    return [QAExample(qid, _text(record, "question"), answers, contexts, supporting, decomposition)]


def parse_musique(record: Any, aliases: dict[str, list[str]]) -> list[QAExample]:
    _obj(record)
    qid = _text(record, "id")
    alias_list = _string_list(record.get("answer_aliases") or [], "field 'answer_aliases'")
    paragraphs = _get(record, "paragraphs")
    if not isinstance(paragraphs, list):
        raise BadRecord("field 'paragraphs' must be a list")
    contexts: list[Passage] = []
    supporting: list[str] = []
    for i, para in enumerate(paragraphs):
        if not isinstance(para, dict) or not isinstance(para.get("paragraph_text"), str):
            raise BadRecord(f"paragraphs[{i}] needs a 'paragraph_text' string")
        if not para["paragraph_text"].strip():
            continue
        p = make_passage(str(para.get("title") or ""), para["paragraph_text"])
        contexts.append(p)
        if para.get("is_supporting") is True:
            supporting.append(p.id)
    answers = _answers([_text(record, "answer")], alias_list + aliases.get(qid, []))
    decomposition = musique_decomposition(record.get("question_decomposition"))
    return [QAExample(qid, _text(record, "question"), answers, contexts, list(dict.fromkeys(supporting)), decomposition)]


def parse_strategyqa(record: Any, aliases: dict[str, list[str]]) -> list[QAExample]:
    _obj(record)
    qid = _first_id(record, "qid", "id")
    answer = _get(record, "answer")
    if not isinstance(answer, bool):
        raise BadRecord(f"field 'answer' must be true or false, got {answer!r}")
    facts = _string_list(record.get("facts") or [], "field 'facts'")
    contexts = [make_passage("", f) for f in facts if f.strip()]
    ids = list(dict.fromkeys(p.id for p in contexts))
    decomposition = strategyqa_decomposition(record.get("decomposition"))
    return [QAExample(qid, _text(record, "question"), ["yes" if answer else "no"], contexts, ids, decomposition)]


def _iirc_answers(answer: Any) -> list[str] | None:
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
        return _answers(s["text"] for s in spans)
    if kind in ("value", "binary"):
        value = answer.get("answer_value")
        if value is None or isinstance(value, (dict, list)):
            raise BadRecord(f"answer of type {kind!r} has no answer_value")
        value = str(value).strip()
        unit = str(answer.get("answer_unit") or "").strip()
        return _answers([value], [f"{value} {unit}"] if unit else [])
    raise BadRecord(f"unknown answer type {kind!r}")


def parse_iirc(record: Any, aliases: dict[str, list[str]], report: LoadReport) -> list[QAExample]:
    _obj(record)
    title = str(_get(record, "title"))
    questions = _get(record, "questions")
    if not isinstance(questions, list):
        raise BadRecord("field 'questions' must be a list")
    main = record.get("text")
    main_passage = make_passage(title, main) if isinstance(main, str) and main.strip() else None
    out: list[QAExample] = []
    for qi, q in enumerate(questions):
        try:
            answers = _iirc_answers(_get(q, "answer"))
            if answers is None:
                report.exclude("unanswerable (IIRC answer type 'none')")
                continue
            qid = _first_id(q, "qid", "id")
            snippets = []
            for ci, ctx in enumerate(q.get("context") or []):
                if not isinstance(ctx, dict) or not isinstance(ctx.get("text"), str):
                    raise BadRecord(f"context[{ci}] needs a 'text' string")
                if ctx["text"].strip():
                    source = str(ctx.get("passage") or "main")
                    snippets.append(make_passage(title if source == "main" else source, ctx["text"]))
            contexts = ([main_passage] if main_passage else []) + snippets
            supporting = list(dict.fromkeys(p.id for p in snippets))
            answers = _answers(answers, aliases.get(qid, []))
            out.append(QAExample(qid, _text(q, "question"), answers, contexts, supporting))
        except BadRecord as exc:
            raise BadRecord(f"questions[{qi}]: {exc}") from exc
    return out


def _popqa_answers(record: Any) -> list[str]:
    raw = record.get("possible_answers") if isinstance(record, dict) else None
    if raw is None:
        raw = _get(record, "answers")
    if isinstance(raw, str):
        text = raw.strip()
        if text.startswith("["):
            try:
                raw = json.loads(text)
            except json.JSONDecodeError as exc:
                raise BadRecord(f"possible_answers is not a JSON list ({exc.msg})") from exc
    return _string_list(raw, "possible_answers")


def parse_popqa(record: Any, aliases: dict[str, list[str]], index: int) -> list[QAExample]:
    _obj(record)
    qid = str(record.get("id") if record.get("id") is not None else "").strip() or str(index)
    contexts = _generic_contexts(record.get("ctxs") or [], "ctxs")[0]
    answers = _answers(_popqa_answers(record), aliases.get(qid, []))
    return [QAExample(qid, _text(record, "question"), answers, contexts, [])]


def _generic_contexts(items: Any, name: str) -> tuple[list[Passage], list[str]]:
    if not isinstance(items, list):
        raise BadRecord(f"field {name!r} must be a list")
    contexts, supporting = [], []
    for i, item in enumerate(items):
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise BadRecord(f"{name}[{i}] needs a 'text' string")
        if not item["text"].strip():
            continue
        p = make_passage(str(item.get("title") or ""), item["text"])
        contexts.append(p)
        if item.get("supporting") is True or item.get("is_supporting") is True:
            supporting.append(p.id)
    return contexts, list(dict.fromkeys(supporting))


def parse_jsonl(record: Any, aliases: dict[str, list[str]]) -> list[QAExample]:
    _obj(record)
    qid = _text(record, "id")
    raw = record.get("answers") if record.get("answers") is not None else record.get("answer")
    if raw is None:
        raise BadRecord("missing field 'answers'")
    answers = _answers(_string_list(raw, "field 'answers'"), aliases.get(qid, []))
    contexts, supporting = _generic_contexts(record.get("contexts") or [], "contexts")
    return [QAExample(qid, _text(record, "question"), answers, contexts, supporting)]


# ---- dispatch --------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    style: str  # "array", "jsonl" or "popqa" (chosen by file)
    yes_no: bool = False


DATASETS: dict[str, DatasetSpec] = {
    "hotpotqa": DatasetSpec("hotpotqa", "array"),
    "2wikimultihopqa": DatasetSpec("2wikimultihopqa", "array"),
    "musique": DatasetSpec("musique", "jsonl"),
    "strategyqa": DatasetSpec("strategyqa", "array", yes_no=True),
    "iirc": DatasetSpec("iirc", "array"),
    "popqa": DatasetSpec("popqa", "popqa"),
    "jsonl": DatasetSpec("jsonl", "jsonl"),
}


def dataset_spec(name: str) -> DatasetSpec:
    if name not in DATASETS:
        raise ConfigError(f"unknown dataset {name!r}; choose one of: {', '.join(DATASETS)}")
    return DATASETS[name]


def load_aliases(path: Path) -> dict[str, list[str]]:
    """An alias file: a JSON object {id: [aliases]} or JSONL of {Q_id, aliases, demonyms}."""
    path = Path(path)
    if first_char(path) == "{" and _is_single_object(path):
        data = json.loads(read_text(path))
        out = {}
        for key, value in data.items():
            if not isinstance(value, (list, str)):
                raise DataError(str(path), f"aliases of {key!r} must be a list of strings")
            out[str(key)] = [value] if isinstance(value, str) else [str(v) for v in value]
        return out
    out = {}
    for line, _, rec in iter_jsonl(path):
        if isinstance(rec, BadRecord) or not isinstance(rec, dict) or "Q_id" not in rec:
            raise DataError(str(path), "expected {Q_id, aliases, demonyms} per line", line)
        names = [str(a) for a in (rec.get("aliases") or []) + (rec.get("demonyms") or [])]
        out[str(rec["Q_id"])] = names
    return out


def _is_single_object(path: Path) -> bool:
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError:
        return False  # JSONL: several objects
    return isinstance(data, dict) and "Q_id" not in data  # a one-line official file is JSONL


def _records(spec: DatasetSpec, path: Path) -> Iterator[tuple[int, int, Any]]:
    if spec.style == "array":
        # The official files are JSON lists; one record a line (as some released subsets are) works too.
        return iter_json_array(path) if first_char(path) in ("[", "") else iter_jsonl(path)
    if spec.style == "jsonl":
        return iter_jsonl(path)
    # popqa: TSV by extension, else a JSON list or JSONL by the first character
    if path.suffix.lower() in (".tsv", ".txt"):
        return iter_tsv(path)
    return iter_json_array(path) if first_char(path) == "[" else iter_jsonl(path)


def _describe(exc: Exception) -> str:
    if isinstance(exc, BadRecord):
        return str(exc)
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}"
    return f"{type(exc).__name__}: {exc}"


def load_examples(
    dataset: str,
    path: str | Path,
    *,
    aliases: dict[str, list[str]] | None = None,
    skip_bad: bool = False,
    report: LoadReport | None = None,
    limit: int | None = None,
) -> Iterator[QAExample]:
    """Yield the examples of a benchmark file in file order (streaming for JSONL/TSV).

    A malformed record raises ``DataError`` naming the file, line and record index; with
    ``skip_bad`` it is counted in ``report`` instead. Duplicate ids are malformed records.
    """
    spec = dataset_spec(dataset)
    path = Path(path)
    if not path.exists():
        raise DataError(str(path), "no such file")
    aliases = aliases or {}
    report = report if report is not None else LoadReport()
    parse: Callable[[Any, int], list[QAExample]] = {
        "hotpotqa": lambda r, i: parse_hotpotqa(r, aliases),
        "2wikimultihopqa": lambda r, i: parse_2wiki(r, aliases),
        "musique": lambda r, i: parse_musique(r, aliases),
        "strategyqa": lambda r, i: parse_strategyqa(r, aliases),
        "iirc": lambda r, i: parse_iirc(r, aliases, report),
        "popqa": lambda r, i: parse_popqa(r, aliases, i),
        "jsonl": lambda r, i: parse_jsonl(r, aliases),
    }[spec.name]
    seen: dict[str, int] = {}
    produced = 0
    for line, index, record in _records(spec, path):
        if limit is not None and produced >= limit:
            return
        try:
            if isinstance(record, BadRecord):
                raise record
            examples = parse(record, index)
            for ex in examples:
                if ex.id in seen:
                    raise BadRecord(f"duplicate id {ex.id!r} (first seen on line {seen[ex.id]})")
        except (BadRecord, KeyError, TypeError, ValueError, AttributeError) as exc:
            message = f"record {index}: {_describe(exc)}"
            if not skip_bad:
                raise DataError(str(path), message, line) from exc
            report.skip(f"{path}:{line}: {message}")
            continue
        for ex in examples:
            if limit is not None and produced >= limit:
                return
            seen[ex.id] = line
            produced += 1
            yield ex
