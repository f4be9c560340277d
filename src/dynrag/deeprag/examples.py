"""Training examples: token ids and labels, with -100 wherever the model must not learn.

An imitation example is the narrative of one trajectory as the method will later read and write
it (no worked examples in the prompt): instruction and question (given), then every sub-question,
decision marker, answer and the final answer (learned), with the retrieved passages in between
(given: label -100, so the model never learns to write passages), then the end-of-sequence token
(learned). A token carries loss when the last character it covers lies in a learned segment.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterable

from dynrag.deeprag.trajectory import Trajectory
from dynrag.lm.base import Prompt
from dynrag.methods.deeprag.narrative import FINAL_SEG, LEARNED_SEGMENTS, Narrative, final_line

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


def narrative_text(trajectory: Trajectory, narrative: Narrative) -> Prompt:
    prompt = narrative.prompt(trajectory.question, trajectory.steps)
    return prompt.add(FINAL_SEG, final_line(trajectory.final_answer))


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


def imitation_example(tokenizer: Any, trajectory: Trajectory, narrative: Narrative | None = None) -> TrainExample:
    narrative = narrative or Narrative(shots=0)
    ids, labels = masked_tokens(tokenizer, narrative_text(trajectory, narrative))
    eos = tokenizer.eos_token_id
    if eos is not None:
        ids.append(eos)
        labels.append(eos)
    return TrainExample(trajectory.id, tuple(ids), tuple(labels))


def examples_fingerprint(examples: Iterable[TrainExample]) -> str:
    """A checksum of the exact token sequences: a resumed run must train on the same data."""
    digest = hashlib.sha256()
    for ex in examples:
        digest.update(json.dumps([ex.id, ex.input_ids, ex.labels]).encode())
    return digest.hexdigest()
