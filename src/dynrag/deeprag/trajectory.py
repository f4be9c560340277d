"""The trajectory JSONL format: one line per question with its optimal narrative.

    {"format": "dynrag-trajectory/1", "id": ..., "dataset": ..., "question": ...,
     "steps": [{"subquery": ..., "retrieve": true, "passages": [{"id", "title", "text"}], "answer": ...}],
     "final_answer": ..., "retrievals": 1, "tree": {"expanded", "pushed", "terminals", "queued"},
     "generations": 9, "seconds": 12.3}

Optional, by the synth's `keep`: each step's "other" (the same sub-question answered with the
decision not taken: the rejected side of a response pair), and "correct" (every correct narrative
of the tree, [{"steps", "final_answer"}], the selected one included). "select" names the choice.

Everything in a trajectory was written by a model or returned by the retriever; no gold answer
is stored (the dataset file has them). Questions without a correct narrative go to a second file
(`skipped.jsonl`: id, reason, tree counts) so a resumed run does not search them again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dynrag.corpus.passage import Passage
from dynrag.errors import DataError, json_problem
from dynrag.io.jsonl import read_jsonl
from dynrag.methods.deeprag.narrative import NARRATIVE_STYLES, NarrativeStep, NarrativeStyle

TRAJECTORY_FORMAT = "dynrag-trajectory/1"
TRAJECTORIES, SKIPPED = "trajectories.jsonl", "skipped.jsonl"


@dataclass(frozen=True)
class Trajectory:
    id: str
    question: str
    steps: tuple[NarrativeStep, ...]
    final_answer: str
    others: tuple[NarrativeStep, ...] = ()  # per step, the decision not taken (keep=siblings)
    correct: tuple[tuple[tuple[NarrativeStep, ...], str], ...] = ()  # every correct narrative (keep=all-correct)
    narrative: NarrativeStyle = "plain"  # the prompt style it was searched in; training must use the same

    @property
    def retrievals(self) -> int:
        return sum(s.retrieve for s in self.steps)


def trajectory_record(
    qid: str, dataset: str, question: str, steps: tuple[NarrativeStep, ...], final_answer: str,
    tree: dict[str, int], generations: int, seconds: float,
) -> dict[str, Any]:
    return {
        "format": TRAJECTORY_FORMAT,
        "id": qid,
        "dataset": dataset,
        "question": question,
        "steps": [s.to_dict() for s in steps],
        "final_answer": final_answer,
        "retrievals": sum(s.retrieve for s in steps),
        "tree": tree,
        "generations": generations,
        "seconds": round(seconds, 3),
    }


def _string(record: dict, key: str, where: str) -> str:
    value = record.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{where}{key!r} must be a string")
    return value


def parse_trajectory(record: Any) -> Trajectory:
    """A Trajectory from one JSONL record; ValueError says which field is wrong."""
    if not isinstance(record, dict):
        raise ValueError("expected a JSON object")
    if record.get("format") != TRAJECTORY_FORMAT:
        raise ValueError(f"'format' must be {TRAJECTORY_FORMAT!r} (got {record.get('format')!r})")
    qid, question, final = (_string(record, k, "") for k in ("id", "question", "final_answer"))
    steps = parse_steps(record.get("steps"), "")
    others = tuple(_step(s["other"], f"steps[{i}].other.") for i, s in enumerate(record["steps"]) if "other" in s)
    if others and len(others) != len(steps):
        raise ValueError("'other' must be given for every step or for none")
    style = record.get("narrative", "plain")  # records written before styles existed are plain
    if style not in NARRATIVE_STYLES:
        raise ValueError(f"'narrative' must be one of {', '.join(NARRATIVE_STYLES)} (got {style!r})")
    correct = []
    for i, c in enumerate(record.get("correct", [])):
        if not isinstance(c, dict):
            raise ValueError(f"correct[{i}] must be an object")
        correct.append((parse_steps(c.get("steps"), f"correct[{i}]."), _string(c, "final_answer", f"correct[{i}].")))
    return Trajectory(qid, question, steps, final, others, tuple(correct), style)


def parse_steps(raw_steps: Any, where: str) -> tuple[NarrativeStep, ...]:
    if not isinstance(raw_steps, list):
        raise ValueError(f"{where}'steps' must be a list")
    return tuple(_step(s, f"{where}steps[{i}].") for i, s in enumerate(raw_steps))


def _step(s: Any, where: str) -> NarrativeStep:
    if not isinstance(s, dict):
        raise ValueError(f"{where.rstrip('.')} must be an object")
    if not isinstance(s.get("retrieve"), bool):
        raise ValueError(f"{where}'retrieve' must be true or false")
    passages = s.get("passages", [])
    if not isinstance(passages, list) or not all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in passages):
        raise ValueError(f"{where}'passages' must be a list of {{title, text}}")
    return NarrativeStep(
        _string(s, "subquery", where),
        s["retrieve"],
        _string(s, "answer", where),
        tuple(Passage(str(p.get("id", "")), str(p.get("title") or ""), p["text"]) for p in passages),
    )


def _validate(record: Any) -> str | None:
    try:
        parse_trajectory(record)
    except ValueError as exc:
        return f"bad trajectory: {exc}"
    return None


def trajectory_file(path: str | Path) -> Path:
    """A synth output directory means its trajectories.jsonl."""
    path = Path(path)
    return path / TRAJECTORIES if path.is_dir() else path


def read_trajectories(path: str | Path) -> list[Trajectory]:
    """Every trajectory of a file (or synth directory), strictly: any bad line, the last one
    included, is a DataError naming the file and line."""
    path = trajectory_file(path)
    if not path.is_file():
        raise DataError(str(path), "no such trajectory file (run `dynrag synth` first)")
    records = read_jsonl(path, validate=_validate)
    lines = [i for i, line in enumerate(path.read_bytes().split(b"\n"), 1) if line.strip()]
    if len(records) < len(lines):  # read_jsonl forgives a torn last line; training input may not
        line_no = lines[len(records)]
        raw = path.read_bytes().split(b"\n")[line_no - 1]
        try:
            import json

            problem = _validate(json.loads(raw)) or "line not terminated"
        except ValueError as exc:
            problem = json_problem(exc)
        raise DataError(str(path), problem, line_no)
    return [parse_trajectory(r) for r in records]
