"""Texts a query transform had the model write, kept on disk so a sweep writes each one once.

Sweeping hybrid's alpha with HyDE searches the same expanded questions five times; generating the
texts (HyDE passages, rewritten queries, sub-questions: retrieval/query_transforms.py) is ~100x
the cost of searching with them, so they are written once and reused.

The file is JSONL, one record per text:
``{"format": "dynrag-hyde/2", "kind", "model", "max_new_tokens", "prompt_sha256", "sampling",
"question", "text", "decoded_tokens", "seconds"}``; ``kind`` is the prompt's (``hyde``,
``rewrite``, ``decompose``), ``sampling`` null for the greedy text, else how the extra text was
drawn (``temperature``, ``top_p``, ``draw`` and its ``seed``). Records are appended and flushed as
each text is written (an interrupted run keeps what it wrote). A record is reused only when kind,
model, max_new_tokens, the prompt's hash and the sampling match; a cut-short last line (a crash
mid-write) is ignored, and cut off before the next append; any other bad line is an error naming
the file and line. Files of the first format (``dynrag-hyde/1``: HyDE passages only, the text
under ``passage``) are still read, as greedy ``hyde`` records.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dynrag.io.faults import file_errors
from dynrag.io.jsonl import JsonlAppender, read_jsonl
from dynrag.lm.base import LanguageModel
from dynrag.retrieval.hyde import HYDE, join_query
from dynrag.retrieval.query_prompts import QueryPrompt

if TYPE_CHECKING:
    from dynrag.lm.chat import ChatFrame

FORMAT = "dynrag-hyde/2"
FORMAT_V1 = "dynrag-hyde/1"
PROMPT_SHA256 = HYDE.sha256()  # the plain HyDE prompt's (what a dynrag-hyde/1 record was written under)
# How the extra texts of hyde-multi are drawn (each seeded by its question and its draw).
TEMPERATURE, TOP_P, SEED = 0.7, 0.95, 0

Key = tuple[str, str, int, str, str, str]  # kind, model, max_new_tokens, prompt_sha256, sampling, question


def sampling_of(question: str, draw: int) -> dict[str, Any] | None:
    """How text number ``draw`` (0: the greedy one) of ``question`` is written: None (greedy), or
    the settings of its draw, with a seed of its own so the same question gets the same text
    whatever else a run asks for, in whatever order."""
    if draw == 0:
        return None
    digest = hashlib.sha256(f"{SEED}:{draw}:{question}".encode("utf-8")).digest()
    return {"temperature": TEMPERATURE, "top_p": TOP_P, "draw": draw, "seed": int.from_bytes(digest[:8], "little") >> 1}


class QueryTexts:
    """(prompt, question, draw) -> the text ``lm`` writes, from ``path`` when recorded there, else
    written now (and appended there). ``frame``: the model's chat frame when it is prompted in the
    chat style (methods.prompting.chat_frame), None for plain text."""

    def __init__(self, lm: LanguageModel, path: Path | None = None, frame: ChatFrame | None = None):
        self.lm, self.path, self.frame = lm, Path(path) if path else None, frame
        self.records: dict[Key, dict[str, Any]] = self._read() if self.path else {}
        self.generated = 0  # texts written by the model in this process
        self.reused = 0  # texts taken from the file (or from earlier in this process)
        self._hashes: dict[QueryPrompt, str] = {}
        self._tail_checked = False

    def _read(self) -> dict[Key, dict[str, Any]]:
        assert self.path is not None
        records = {}
        for record in read_jsonl(self.path, validate=_record_problem):
            if record["format"] == FORMAT_V1:
                record = {**record, "kind": "hyde", "sampling": None, "text": record["passage"]}
            records[_key_of(record)] = record
        return records

    def key(self, prompt: QueryPrompt, question: str, max_new_tokens: int, draw: int = 0) -> Key:
        if prompt not in self._hashes:
            self._hashes[prompt] = prompt.sha256(self.frame)
        sampling = json.dumps(sampling_of(question, draw), sort_keys=True)
        return (prompt.kind, self.lm.name, max_new_tokens, self._hashes[prompt], sampling, question)

    def record(self, prompt: QueryPrompt, question: str, max_new_tokens: int, draw: int = 0) -> dict[str, Any] | None:
        """The record of that text when it was written already (nothing is generated or counted)."""
        return self.records.get(self.key(prompt, question, max_new_tokens, draw))

    def text(self, prompt: QueryPrompt, question: str, max_new_tokens: int, draw: int = 0) -> str:
        """The text, read back or written now (and recorded)."""
        key = self.key(prompt, question, max_new_tokens, draw)
        record = self.records.get(key)
        if record is not None:
            self.reused += 1
            return record["text"]
        sampling = sampling_of(question, draw)
        drawn = None
        if sampling is not None:
            from dynrag.lm.row_decode import Sampling

            drawn = Sampling(sampling["temperature"], sampling["top_p"], sampling["seed"])
        started = time.perf_counter()
        text, decoded = prompt.write(self.lm, question, max_new_tokens, self.frame, drawn)
        record = {"format": FORMAT, "kind": prompt.kind, "model": self.lm.name, "max_new_tokens": max_new_tokens,
                  "prompt_sha256": key[3], "sampling": sampling, "question": question, "text": text,
                  "decoded_tokens": decoded, "seconds": round(time.perf_counter() - started, 4)}
        self.records[key] = record
        self.generated += 1
        if self.path is not None:
            if not self._tail_checked:
                _drop_torn_tail(self.path)
                self._tail_checked = True
            with JsonlAppender(self.path) as out:
                out.append(record)
        return text


class HydePassages(QueryTexts):
    """question -> its greedy hypothetical passage (the one text ``--query-transform hyde`` needs)."""

    def __init__(self, lm: LanguageModel, path: Path | None = None, max_new_tokens: int = 64,
                 frame: ChatFrame | None = None):
        super().__init__(lm, path, frame)
        self.max_new_tokens = max_new_tokens

    def passage(self, question: str) -> str:
        return self.text(HYDE, question, self.max_new_tokens)

    def expand(self, questions: list[str]) -> list[str]:
        """The texts to search: each question followed by its hypothetical passage."""
        return [join_query(q, self.passage(q)) for q in questions]

    def generation_seconds(self, questions: list[str]) -> float:
        """Seconds the model spent writing these questions' passages (as recorded when written)."""
        found = (self.record(HYDE, q, self.max_new_tokens) for q in dict.fromkeys(questions))
        return sum(r["seconds"] for r in found if r is not None)


def _key_of(record: dict[str, Any]) -> Key:
    return (record["kind"], record.get("model"), record.get("max_new_tokens"), record.get("prompt_sha256"),
            json.dumps(record.get("sampling"), sort_keys=True), record["question"])


def _record_problem(record: Any) -> str | None:
    if not isinstance(record, dict) or record.get("format") not in (FORMAT, FORMAT_V1):
        return f"not a {FORMAT} record"
    text = "passage" if record["format"] == FORMAT_V1 else "text"
    if not isinstance(record.get("question"), str) or not isinstance(record.get(text), str):
        return f"question and {text} must be strings"
    if record["format"] == FORMAT and not isinstance(record.get("kind"), str):
        return "kind must be a string"
    return None


def _drop_torn_tail(path: Path) -> None:
    """Cut an unterminated last line (a write cut short by a crash; reading ignored it) off the
    file, so the next record starts on a line of its own."""
    with file_errors(path):
        if not path.exists() or path.stat().st_size == 0:
            return
        with open(path, "r+b") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) == b"\n":
                return
            f.seek(0)
            data = f.read()
            f.truncate(data.rfind(b"\n") + 1)
            f.flush()
            os.fsync(f.fileno())
