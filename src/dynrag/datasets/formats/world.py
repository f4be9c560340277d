"""A knowledge-controlled world (``dynrag world make``): MuSiQue-like records, read by the MuSiQue
parser, so the gold decomposition fills ``QAExample.decomposition``; the record's
``world.needs_retrieval`` (some hop unknown to the probed model) fills ``needs_retrieval``, and
each hop's ``entity`` and ``known`` fill ``hops`` (per-hop decision scoring: the entry's ``decisions``, datasets/world_decisions.py).
Worked examples in MuSiQue's multi-hop style."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dynrag.datasets.formats.musique import parse_musique
from dynrag.datasets.formats.registry import DATASETS, Dataset, DecisionScoring, ParseContext
from dynrag.datasets.examples import Hop, QAExample
from dynrag.datasets.records import BadRecord, iter_jsonl
from dynrag.datasets.world_decisions import retrieval_decisions, world_record_fields
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


# A world knows, per question and per hop, whether the model knows the answer: each record keeps
# that truth beside the method's decisions, and the summary scores the decisions against it.
WORLD_DECISIONS = DecisionScoring(world_record_fields, "retrieval_decisions", retrieval_decisions)


@DATASETS.register("world", summary="a generated world's train/dev/test JSONL (dynrag world make)")
def world(options: Options) -> Dataset:
    return Dataset("world", iter_jsonl, parse_world, exemplars="musique", decisions=WORLD_DECISIONS, decomposes=True)
