"""GRPO rollouts: G sampled DeepRAG narratives per training question, from the current policy.

Each rollout is one run of the `deeprag` method's own loop (DeepRag.narrate: sub-questions,
atomic decisions, retrieval through the method's retrieval chain, answers) with the model's
tokens drawn (lm.sampled) instead of chosen greedily. The n-th generation of a rollout has its
own seeded generator, derived from (seed, step, question id, rollout index): a rollout is
reproducible from those alone.

What is trained on is the narrative as the method reads it back (narrative.py renders it: the
same text stage I imitates): its token ids, and labels that keep only what the model wrote
(sub-questions, decision markers, answers, the final line, end of sequence); the question,
passages and restated sub-questions are -100, never scored. A line the method discarded or
normalised (an unparseable line before a forced final answer, extra spaces) is scored in the
form the narrative keeps.

    OUT/rollouts.jsonl   one fsynced line per (step, question): its G rollouts, with token ids,
                         learned-token spans, passage-token spans, answer, scores, retrievals,
                         reward. A resumed run reads these instead of sampling again.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from dynrag.deeprag.examples import imitation_example, narrative_text
from dynrag.training.examples import IGNORE, masked_tokens
from dynrag.deeprag.rewards import RewardOptions, rollout_reward
from dynrag.deeprag.trajectory import Trajectory, parse_steps
from dynrag.errors import DataError
from dynrag.datasets.examples import QAExample
from dynrag.datasets.metrics import score_answer
from dynrag.io.jsonl import JsonlAppender, read_jsonl
from dynrag.lm.row_decode import Sampling
from dynrag.methods.deeprag.narrative import PASSAGES_SEG, Narrative, NarrativeStep

ROLLOUTS = "rollouts.jsonl"


@dataclass(frozen=True)
class Rollout:
    index: int
    steps: tuple[NarrativeStep, ...]
    final_answer: str
    wrote_final: bool  # the model wrote the final-answer line itself (it was not asked for)
    em: float
    f1: float
    reward: float
    input_ids: tuple[int, ...]
    learned: tuple[tuple[int, int], ...]  # [start, end) token spans that carry loss
    passages: tuple[tuple[int, int], ...]  # [start, end) token spans of retrieved passages

    @property
    def retrievals(self) -> int:
        return sum(s.retrieve for s in self.steps)

    @property
    def labels(self) -> list[int]:
        labels = [IGNORE] * len(self.input_ids)
        for start, end in self.learned:
            labels[start:end] = self.input_ids[start:end]
        return labels

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["steps"] = [s.to_dict() for s in self.steps]
        record["retrievals"] = self.retrievals
        return record

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Rollout":
        return cls(d["index"], parse_steps(d["steps"], "rollout "), d["final_answer"], d["wrote_final"], d["em"], d["f1"], d["reward"],
                   tuple(d["input_ids"]), tuple(tuple(x) for x in d["learned"]), tuple(tuple(x) for x in d["passages"]))


def spans(flags: list[bool]) -> tuple[tuple[int, int], ...]:
    """[start, end) runs of True in `flags`."""
    out, start = [], None
    for i, flag in enumerate([*flags, False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            out.append((start, i))
            start = None
    return tuple(out)


def narrative_tokens(tokenizer: Any, narrative: Narrative, question: str, steps: tuple[NarrativeStep, ...],
                     final: str) -> tuple[list[int], tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]:
    """(token ids, learned spans, passage spans) of a narrative, tokenised as stage I does."""
    trajectory = Trajectory("", question, steps, final)
    example = imitation_example(tokenizer, trajectory, narrative)
    _, passage_labels = masked_tokens(tokenizer, narrative_text(trajectory, narrative), learned=(PASSAGES_SEG,))
    return (list(example.input_ids), spans([label != IGNORE for label in example.labels]),
            spans([label != IGNORE for label in passage_labels]))


def rollout_seed(seed: int, step: int, question_id: str, index: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{step}:{question_id}:{index}".encode()).digest()[:8], "little") >> 1


def sample_group(method: Any, lm: Any, tokenizer: Any, example: QAExample, step: int, group: int, sampling: Sampling,
                 rewards: RewardOptions, yes_no: bool = False) -> list[Rollout]:
    """`group` rollouts of one question: the deeprag method (`method`, running on `lm`) answering it
    with sampled tokens; each scored and rewarded."""
    out = []
    for g in range(group):
        seed = rollout_seed(sampling.seed, step, example.id, g)
        with lm.sampled(Sampling(sampling.temperature, sampling.top_p, seed)):
            narration = method.narrate(example.question)
        final = narration.answer.final_answer or ""
        scores = score_answer(final, final, example.answers, yes_no)
        wrote = not narration.forced_final
        reward = rollout_reward(scores.em, scores.f1, sum(s.retrieve for s in narration.steps), wrote, rewards)
        ids, learned, passages = narrative_tokens(tokenizer, method.narrative, example.question, narration.steps, final)
        out.append(Rollout(g, narration.steps, final, wrote, scores.em, scores.f1, round(reward, 6), tuple(ids),
                           learned, passages))
    return out


class RolloutLog:
    """OUT/rollouts.jsonl: each (step, question)'s group, written once, read back on resume."""

    def __init__(self, out: Path):
        self.path = Path(out) / ROLLOUTS
        self.done: dict[tuple[int, str], list[Rollout]] = {}
        for n, r in enumerate(read_jsonl(self.path, repair=True), 1):
            try:
                self.done[(r["step"], r["id"])] = [Rollout.from_dict(x) for x in r["rollouts"]]
            except (KeyError, TypeError, ValueError) as exc:
                raise DataError(str(self.path), f"line {n}: not a rollout group ({exc}); use another --out") from exc
        self._sink = JsonlAppender(self.path)

    def group(self, step: int, question_id: str, make: Callable[[], list[Rollout]]) -> tuple[list[Rollout], bool]:
        """(the group, whether it was sampled now): from the log when it holds it, else made and appended."""
        key = (step, question_id)
        if key in self.done:
            return self.done[key], False
        rollouts = make()
        self._sink.append({"step": step, "id": question_id, "rollouts": [r.to_dict() for r in rollouts]})
        self.done[key] = rollouts
        return rollouts, True

    def close(self) -> None:
        self._sink.close()
