"""A knowledge-controlled world (``dynrag world make``): MuSiQue-like records, read by the MuSiQue
parser, so the gold decomposition fills ``QAExample.decomposition``; the record's
``world.needs_retrieval`` (some hop unknown to the probed model) fills ``needs_retrieval``, and
each hop's ``entity`` and ``known`` fill ``hops`` (per-hop decision scoring, world/hops.py).
Worked examples in MuSiQue's multi-hop style."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dynrag.eval.datasets.musique import parse_musique
from dynrag.eval.datasets.registry import DATASETS, Dataset, ParseContext
from dynrag.eval.examples import Hop, QAExample
from dynrag.eval.records import BadRecord, iter_jsonl
from dynrag.registry import Options


def parse_world(record: Any, ctx: ParseContext) -> list[QAExample]:
    examples = parse_musique(record, ctx)
    info = record.get("world")
    if info is None:
        return examples
    if not isinstance(info, dict):
        raise BadRecord("field 'world' must be an object")
    needs = info.get("needs_retrieval")
    if needs is not None and not isinstance(needs, bool):
        raise BadRecord("field 'world.needs_retrieval' must be true, false or null")
    hops = world_hops(record.get("question_decomposition"))
    return [replace(e, needs_retrieval=needs, hops=hops) for e in examples]


def world_hops(value: Any) -> list[Hop]:
    """The hops of a world record's ``question_decomposition``: each needs an ``entity`` string and
    ``known`` true, false or null."""
    if not isinstance(value, list):
        return []
    out = []
    for i, step in enumerate(value):
        if not isinstance(step, dict) or not isinstance(step.get("entity"), str):
            raise BadRecord(f"question_decomposition[{i}] needs an 'entity' string")
        known = step.get("known")
        if known is not None and not isinstance(known, bool):
            raise BadRecord(f"question_decomposition[{i}].known must be true, false or null")
        out.append(Hop(step["entity"], known))
    return out


@DATASETS.register("world", summary="a generated world's train/dev/test JSONL (dynrag world make)")
def world(options: Options) -> Dataset:
    return Dataset("world", iter_jsonl, parse_world, exemplars="musique")
