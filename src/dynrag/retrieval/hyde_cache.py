"""Hypothetical passages kept on disk, so a HyDE sweep writes each question's passage once.

Sweeping hybrid's alpha with HyDE searches the same expanded questions five times; generating
the passages is ~100x the cost of searching with them, so they are written once and reused.

The file is JSONL, one record per question:
``{"format": "dynrag-hyde/1", "model", "max_new_tokens", "prompt_sha256", "question", "passage",
"decoded_tokens", "seconds"}``. Records are appended and flushed as each passage is written (an
interrupted run keeps what it wrote). A record is reused only when the model, max_new_tokens and
the prompt's hash match; a cut-short last line (a crash mid-write) is ignored; any other bad line
is an error naming the file and line.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

from dynrag.io.jsonl import JsonlAppender, read_jsonl
from dynrag.lm.base import LanguageModel
from dynrag.retrieval.hyde import HYDE_PROMPT, hypothetical_passage, join_query

FORMAT = "dynrag-hyde/1"
PROMPT_SHA256 = hashlib.sha256(HYDE_PROMPT.encode("utf-8")).hexdigest()


class HydePassages:
    """question -> hypothetical passage, from ``path`` when recorded there, else written by ``lm``."""

    def __init__(self, lm: LanguageModel, path: Path | None = None, max_new_tokens: int = 64):
        self.lm, self.path, self.max_new_tokens = lm, Path(path) if path else None, max_new_tokens
        self._key = {"model": lm.name, "max_new_tokens": max_new_tokens, "prompt_sha256": PROMPT_SHA256}
        self.records: dict[str, dict[str, Any]] = self._read() if self.path else {}
        self.generated = 0  # passages written by the model in this process
        self.reused = 0  # passages taken from the file

    def _read(self) -> dict[str, dict[str, Any]]:
        assert self.path is not None
        return {
            record["question"]: record
            for record in read_jsonl(self.path, validate=_record_problem)
            if all(record.get(k) == v for k, v in self._key.items())
        }

    def passage(self, question: str) -> str:
        record = self.records.get(question)
        if record is not None:
            self.reused += 1
            return record["passage"]
        started = time.perf_counter()
        passage, decoded = hypothetical_passage(self.lm, question, self.max_new_tokens)
        record = {"format": FORMAT, **self._key, "question": question, "passage": passage,
                  "decoded_tokens": decoded, "seconds": round(time.perf_counter() - started, 4)}
        self.records[question] = record
        self.generated += 1
        if self.path is not None:
            with JsonlAppender(self.path) as out:
                out.append(record)
        return passage

    def expand(self, questions: list[str]) -> list[str]:
        """The texts to search: each question followed by its hypothetical passage."""
        return [join_query(q, self.passage(q)) for q in questions]

    def generation_seconds(self, questions: list[str]) -> float:
        """Seconds the model spent writing these questions' passages (as recorded when written)."""
        return sum(self.records[q]["seconds"] for q in questions if q in self.records)


def _record_problem(record: Any) -> str | None:
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        return f"not a {FORMAT} record"
    if not isinstance(record.get("question"), str) or not isinstance(record.get("passage"), str):
        return "question and passage must be strings"
    return None
