"""summary.json of a synth directory: counts and rates, recomputed from its two files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dynrag.deeprag.search import exhaustive_nodes
from dynrag.deeprag.trajectory import SKIPPED, TRAJECTORIES
from dynrag.datasets.loaders import QAExample
from dynrag.io.files import atomic_write_json
from dynrag.io.jsonl import read_jsonl

SUMMARY = "summary.json"


def node_budget_summary(config: dict[str, Any], skipped: list[dict[str, Any]]) -> dict[str, Any]:
    """The node budget and what it cut: how many questions, by the retrieval count being tried.

    ``cut_at_retrievals`` maps r to the questions cut while narratives with r retrievals were being
    tried (every narrative with fewer had been tried and was wrong); ``"?"`` for records written
    before the count was kept.
    """
    cut_at: dict[str, int] = {}
    for r in skipped:
        if r["reason"] == "node_limit":
            key = "?" if r.get("cut_at") is None else str(r["cut_at"])
            cut_at[key] = cut_at.get(key, 0) + 1
    full = exhaustive_nodes(config["max_steps"], config.get("max_retrievals"))
    return {
        "max_nodes": config["max_nodes"],
        "exhaustive": config["max_nodes"] >= full,
        "whole_tree": full,
        "cut": sum(cut_at.values()),
        "cut_at_retrievals": dict(sorted(cut_at.items(), key=lambda kv: (kv[0] == "?", kv[0].zfill(4)))),
    }


def by_gold_hops(examples: list[QAExample], found_ids: set[str], searched_ids: set[str]) -> dict[str, dict[str, int]]:
    """Questions searched and found, by the length of their gold decomposition (questions without
    one are left out: the count says nothing about them)."""
    table: dict[int, dict[str, int]] = {}
    for ex in examples:
        if ex.decomposition and ex.id in searched_ids:
            row = table.setdefault(len(ex.decomposition), {"searched": 0, "found": 0})
            row["searched"] += 1
            row["found"] += ex.id in found_ids
    return {str(hops): table[hops] for hops in sorted(table)}


def write_summary(out: Path, config: dict[str, Any], examples: list[QAExample]) -> dict[str, Any]:
    ids = {ex.id for ex in examples}
    found = [r for r in read_jsonl(out / TRAJECTORIES) if r["id"] in ids]
    skipped = [r for r in read_jsonl(out / SKIPPED) if r["id"] in ids]
    records = found + skipped
    searched = [r for r in records if r.get("tree")]
    seconds = sum(float(r["seconds"]) for r in records)
    reasons: dict[str, int] = {}
    for r in skipped:
        reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
    histogram: dict[str, int] = {}
    steps: dict[str, int] = {}
    for r in found:
        histogram[str(r["retrievals"])] = histogram.get(str(r["retrievals"]), 0) + 1
        steps[str(len(r["steps"]))] = steps.get(str(len(r["steps"])), 0) + 1

    def mean(values: list[float]) -> float | None:
        return round(sum(values) / len(values), 4) if values else None

    summary = {
        "dataset": config["dataset"],
        "model": config["model"],
        "teacher": config["teacher"],
        "questions": len(records),
        "selected": len(examples),
        "found": len(found),
        "share_found": mean([1.0] * len(found) + [0.0] * len(skipped)),
        "skipped": reasons,
        "expanded_per_question": mean([float(r["tree"]["expanded"]) for r in searched]),
        "generations_per_question": mean([float(r["generations"]) for r in searched]),
        "retrievals_on_optimal_path": mean([float(r["retrievals"]) for r in found]),
        "steps_on_optimal_path": mean([float(len(r["steps"])) for r in found]),
        "retrievals_histogram": dict(sorted(histogram.items(), key=lambda kv: int(kv[0]))),
        "steps_histogram": dict(sorted(steps.items(), key=lambda kv: int(kv[0]))),
        "share_two_or_more_steps": mean([float(len(r["steps"]) >= 2) for r in found]),
        "by_gold_hops": by_gold_hops(examples, {r["id"] for r in found}, {r["id"] for r in records}),
        "seconds_per_question": mean([float(r["seconds"]) for r in records]),
        "questions_per_hour": round(3600 * len(records) / seconds, 2) if seconds else None,
        "node_budget": node_budget_summary(config, skipped),
    }
    atomic_write_json(out / SUMMARY, summary)
    return summary
