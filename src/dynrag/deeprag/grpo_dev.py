"""Held-out checks of a GRPO run (the paper's Figure 3 is measured this way): every `every`
optimizer steps, and before the first, the policy answers the dev questions greedily with the
deeprag method, and each question's EM, F1 and retrievals are written down.

    OUT/dev_log.jsonl   one fsynced line per checked step: the step, and per question its id,
                        EM, F1, retrievals and sub-questions
    OUT/grpo_dev.png    dev F1 and retrievals per question against the optimizer step

A step's line is written only when all its questions are answered, so a run killed during a check
answers that step again on resume (from its checkpoint; the trainer saves one before the check
when `every` is a multiple of `save_every`) and never logs a step twice. The rollouts' own
scores (train_log.jsonl) are not this: they are sampled, on training questions, by a policy that
changes within the step.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from dynrag.datasets.examples import QAExample
from dynrag.datasets.metrics import score_answer
from dynrag.errors import ConfigError, DataError
from dynrag.io.jsonl import JsonlAppender, read_jsonl

DEV_LOG = "dev_log.jsonl"
DEV_PLOT = "grpo_dev.png"


@dataclass(frozen=True)
class DevCheck:
    """The questions checked and how often: at step 0, every `every` steps, and at the last."""

    questions: Sequence[QAExample]
    every: int

    def __post_init__(self) -> None:
        if self.every < 1:
            raise ConfigError(f"--dev-every must be at least 1 (got {self.every})")
        if not self.questions:
            raise ConfigError("--dev-data holds no questions to check")

    def due(self, step: int, total: int) -> bool:
        return step % self.every == 0 or step == total


def load_dev_check(dataset: str, data: Path, limit: int | None, every: int, console: Any) -> DevCheck:
    """The first `limit` questions of `data` (a file in `dataset`'s format), checked every `every` steps."""
    from dynrag.datasets.formats.registry import dataset_spec
    from dynrag.eval.steps import load_questions
    from dynrag.run.checks import check_data_file

    spec = dataset_spec(dataset)
    if limit is not None and limit < 1:
        raise ConfigError(f"--dev-limit must be at least 1 (got {limit})")
    questions, _ = load_questions(spec.name, check_data_file(Path(data), spec.name), console, limit=limit)
    return DevCheck(questions, every)


def refuse_overlap(check: DevCheck, training: Sequence[QAExample]) -> None:
    """Held-out means held out: a dev question that is also a training question is an error."""
    shared = sorted({q.id for q in check.questions} & {q.id for q in training})
    if shared:
        raise ConfigError(f"--dev-data shares {len(shared)} question(s) with --data (first: {shared[0]}); "
                          "check on questions the run does not train on")


def dev_summary(record: dict[str, Any]) -> dict[str, float]:
    """A checked step's means: EM, F1, retrievals and sub-questions per question."""
    rows = record["questions"]
    n = len(rows)
    return {"step": record["step"], "n": n, **{key: sum(r[key] for r in rows) / n for key in ("em", "f1", "retrievals", "subquestions")}}


def read_dev_log(out: Path) -> list[dict[str, Any]]:
    """The checked steps of OUT, in step order (a torn last line is dropped)."""
    path = Path(out) / DEV_LOG
    records = []
    for n, record in enumerate(read_jsonl(path, repair=True), 1):
        if not isinstance(record, dict) or "step" not in record or not isinstance(record.get("questions"), list):
            raise DataError(str(path), f"line {n}: not a dev check record; use another --out")
        records.append(record)
    return sorted(records, key=lambda r: r["step"])


class DevLog:
    """OUT/dev_log.jsonl: each checked step once."""

    def __init__(self, out: Path, check: DevCheck):
        self.out, self.check = Path(out), check
        ids = [q.id for q in check.questions]
        self.records = {r["step"]: r for r in read_dev_log(out)}
        for step, record in self.records.items():
            if [r["id"] for r in record["questions"]] != ids:
                raise ConfigError(f"{out / DEV_LOG} checked other dev questions at step {step}; use another --out, "
                                  "or the same --dev-data and --dev-limit to resume")

    def after_step(self, step: int, total: int, policy: Any) -> None:
        """Check the policy at `step` when it is due and not yet written down."""
        if step in self.records or not self.check.due(step, total):
            return
        record = {"step": step, "questions": answer_greedily(policy, self.check.questions)}
        with JsonlAppender(self.out / DEV_LOG) as sink:
            sink.append(record)
        self.records[step] = record

    def plot(self, title: str) -> None:
        from dynrag.training.plot import plot_curves

        summaries = [dev_summary(r) for r in sorted(self.records.values(), key=lambda r: r["step"])]
        if summaries:
            plot_curves(summaries, self.out / DEV_PLOT, title,
                        [("f1", "dev F1"), ("retrievals", "dev retrievals per question")])


def answer_greedily(policy: Any, questions: Sequence[QAExample]) -> list[dict[str, Any]]:
    """Each question answered by the policy's deeprag method with greedy decoding, and scored."""
    policy.model.eval()
    policy.lm.forget_caches()  # the weights changed since the last check
    rows = []
    try:
        for ex in questions:
            narration = policy.method.narrate(ex.question)
            final = narration.answer.final_answer or ""
            scores = score_answer(final, final, ex.answers, policy.yes_no)
            rows.append({"id": ex.id, "em": scores.em, "f1": round(scores.f1, 6), "answer": final,
                         "retrievals": sum(s.retrieve for s in narration.steps), "subquestions": len(narration.steps)})
    finally:
        policy.model.train()
        policy.lm.forget_caches()
    return rows
