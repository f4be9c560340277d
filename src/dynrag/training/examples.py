"""Training examples: token ids and labels, with -100 wherever the model must not learn.

A token carries loss when the last character it covers lies in a learned segment of its prompt;
what the segments are is the recipe's (DeepRAG's narratives, the best-practices reader's answer).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterable

from dynrag.lm.base import Prompt
from dynrag.methods.deeprag.narrative import LEARNED_SEGMENTS

IGNORE = -100


@dataclass(frozen=True)
class TrainExample:
    id: str
    input_ids: tuple[int, ...]
    labels: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def learned_tokens(self) -> int:
        return sum(label != IGNORE for label in self.labels)


def masked_tokens(tokenizer: Any, prompt: Prompt, learned: Iterable[str] = LEARNED_SEGMENTS) -> tuple[list[int], list[int]]:
    """(input ids, labels) of a prompt: a token's label is its id when it ends in a learned
    segment, else -100. No end-of-sequence token is added."""
    learned = set(learned)
    spans = [(s.start, s.end) for s in prompt.segments if s.name in learned]
    enc = tokenizer(prompt.text, add_special_tokens=True, return_offsets_mapping=True)
    ids = list(enc.input_ids)
    labels = [
        tok if end > start and any(a <= end - 1 < b for a, b in spans) else IGNORE
        for tok, (start, end) in zip(ids, enc.offset_mapping)
    ]
    return ids, labels


def examples_fingerprint(examples: Iterable[TrainExample]) -> str:
    """A checksum of the exact token sequences: a resumed run must train on the same data."""
    digest = hashlib.sha256()
    for ex in examples:
        digest.update(json.dumps([ex.id, ex.input_ids, ex.labels]).encode())
    return digest.hexdigest()
