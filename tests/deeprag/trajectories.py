"""Trajectory files written in our own words, for the training tests."""

from __future__ import annotations

import json
from pathlib import Path

from dynrag.deeprag.trajectory import TRAJECTORY_FORMAT

# Words of tests/tiny_models.WORDS, so the tiny tokenizer knows them.
STEP_TEXTS = [
    ("who built the bridge ?", True, "the bridge was built by an engineer in 1887", "an engineer"),
    ("where was the engineer born ?", False, "", "paris"),
    ("which river is in lyon ?", True, "the rhone river is in lyon", "rhone"),
    ("who was the founder of the school ?", False, "", "the engineer"),
]


def trajectory(i: int) -> dict:
    first, second = STEP_TEXTS[i % 4], STEP_TEXTS[(i + 1) % 4]
    steps = []
    for subquery, retrieve, passage, answer in (first, second):
        steps.append({"subquery": subquery, "retrieve": retrieve, "answer": answer,
                      "passages": [{"id": f"p{i}", "title": "town", "text": passage}] if retrieve else []})
    return {"format": TRAJECTORY_FORMAT, "id": f"t{i}", "dataset": "jsonl", "question": f"what is the {i % 7} question ?",
            "steps": steps, "final_answer": second[3], "retrievals": sum(s["retrieve"] for s in steps),
            "tree": {"expanded": 3}, "generations": 3, "seconds": 0.1}


def write_trajectories(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps(trajectory(i)) + "\n" for i in range(n)), encoding="utf-8")
    return path
