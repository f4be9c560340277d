"""Preference pairs for the chain of calibration: one per step of each optimal narrative.

Both sides share the history up to and including the step's sub-question; `chosen` is the
decision the optimal narrative took there (the retrieve marker, or the answer marker), `rejected`
the other one. The pair is about the atomic decision alone, so the completions are the markers.

    {"format": "dynrag-pair/1", "id": "QID:STEP", "question_id": ..., "step": 1, "prompt": "...",
     "chosen": "Search results:", "rejected": "Answer:", "chosen_decision": "retrieve", "split": "train"}
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Literal

from dynrag.deeprag.trajectory import Trajectory
from dynrag.methods.deeprag.narrative import ANSWER, RETRIEVE, Narrative, add_subquery

PAIR_FORMAT = "dynrag-pair/1"


@dataclass(frozen=True)
class PreferencePair:
    id: str
    question_id: str
    step: int
    prompt: str
    chosen: str
    rejected: str
    chosen_decision: Literal["retrieve", "parametric"]
    split: Literal["train", "heldout"] = "train"

    def to_dict(self) -> dict[str, Any]:
        return {"format": PAIR_FORMAT, **asdict(self)}


def heldout_question(question_id: str, fraction: float) -> bool:
    """A fixed share of questions, chosen by a hash of the id, kept out of training."""
    if fraction <= 0:
        return False
    bucket = int(hashlib.sha256(question_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return bucket < fraction


def pairs_from_trajectory(t: Trajectory, narrative: Narrative, heldout: float = 0.0) -> list[PreferencePair]:
    split = "heldout" if heldout_question(t.id, heldout) else "train"
    pairs = []
    for i, step in enumerate(t.steps):
        prompt = add_subquery(narrative.prompt(t.question, t.steps[:i]), step.subquery).text
        chosen, rejected = (RETRIEVE, ANSWER) if step.retrieve else (ANSWER, RETRIEVE)
        pairs.append(PreferencePair(f"{t.id}:{i + 1}", t.id, i + 1, prompt, chosen, rejected,
                                    "retrieve" if step.retrieve else "parametric", split))
    return pairs


def build_pairs(trajectories: Iterable[Trajectory], narrative: Narrative | None = None, heldout: float = 0.0) -> list[PreferencePair]:
    narrative = narrative or Narrative(shots=0)
    return [p for t in trajectories for p in pairs_from_trajectory(t, narrative, heldout)]


def tokenize_pair(tokenizer: Any, pair: PreferencePair) -> tuple[list[int], list[int], list[int]]:
    """(prompt ids, chosen ids, rejected ids), each completion tokenised as it follows the prompt."""
    prompt = list(tokenizer(pair.prompt, add_special_tokens=True).input_ids)

    def completion(text: str) -> list[int]:
        full = list(tokenizer(pair.prompt + text, add_special_tokens=True).input_ids)
        if full[: len(prompt)] == prompt and len(full) > len(prompt):
            return full[len(prompt) :]
        return list(tokenizer(text, add_special_tokens=False).input_ids)

    return prompt, completion(pair.chosen), completion(pair.rejected)
