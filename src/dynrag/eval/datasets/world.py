"""A knowledge-controlled world (``dynrag world make``): MuSiQue-like records, read by the MuSiQue
parser, so the gold decomposition fills ``QAExample.decomposition``; worked examples in MuSiQue's
multi-hop style."""

from __future__ import annotations

from dynrag.eval.datasets.musique import parse_musique
from dynrag.eval.datasets.registry import DATASETS, Dataset
from dynrag.eval.records import iter_jsonl
from dynrag.registry import Options


@DATASETS.register("world", summary="a generated world's train/dev/test JSONL (dynrag world make)")
def world(options: Options) -> Dataset:
    return Dataset("world", iter_jsonl, parse_musique, exemplars="musique")
