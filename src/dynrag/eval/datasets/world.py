"""A knowledge-controlled world (``dynrag world make``): MuSiQue-like records, read by the MuSiQue
parser, so the gold decomposition fills ``QAExample.decomposition``; the record's
``world.needs_retrieval`` (some hop unknown to the probed model) fills ``needs_retrieval``.
Worked examples in MuSiQue's multi-hop style."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dynrag.eval.datasets.musique import parse_musique
from dynrag.eval.datasets.registry import DATASETS, Dataset, ParseContext
from dynrag.eval.examples import QAExample
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
    return [replace(e, needs_retrieval=needs) for e in examples]


@DATASETS.register("world", summary="a generated world's train/dev/test JSONL (dynrag world make)")
def world(options: Options) -> Dataset:
    return Dataset("world", iter_jsonl, parse_world, exemplars="musique")
