"""Per-question "needs retrieval" from a world into eval's predictions and summary."""

from __future__ import annotations

import json
from pathlib import Path

from dynrag.datasets.examples import QAExample
from dynrag.datasets.formats import dataset_spec
from dynrag.datasets.loaders import load_examples
from dynrag.eval.summary import make_record, summarize
from dynrag.datasets.world_decisions import retrieval_decisions
from dynrag.world.entities import generate
from dynrag.world.knowledge import Knowledge
from dynrag.world.make import make_world

from tests.world.fixtures import TINY


def test_decision_figures_hand_checked():
    preds = [{"retrievals": 0, "needs_retrieval": False},  # tp: skipped, and rightly
             {"retrievals": 0, "needs_retrieval": True},   # fp: skipped, though a hop was unknown
             {"retrievals": 2, "needs_retrieval": True},   # tn
             {"retrievals": 1, "needs_retrieval": True},   # tn
             {"retrievals": 1}]                            # no ground truth: not counted
    figures = retrieval_decisions(preds)
    assert (figures["n"], figures["need_retrieval"]) == (4, 3)
    assert (figures["tp"], figures["fp"], figures["fn"], figures["tn"]) == (1, 1, 0, 2)
    assert figures["f1"] == round(2 / 3, 6) and figures["accuracy"] == 0.75


def test_the_world_loader_fills_needs_retrieval_and_eval_records_it(tmp_path: Path):
    real = [f.id for f in generate(TINY).facts if f.real]
    make_world(TINY, tmp_path, Knowledge("m", {fid: "known" for fid in real}))
    examples = [e for split in ("train", "dev", "test") for e in load_examples("world", tmp_path / f"{split}.jsonl")]
    assert {e.needs_retrieval for e in examples} == {True, False}
    assert all(e.needs_retrieval is None for e in load_examples("musique", tmp_path / "dev.jsonl"))
    known = next(e for e in examples if e.needs_retrieval is False)
    answer = {"answer": known.answers[0], "final_answer": known.answers[0], "retrievals": []}
    world = dataset_spec("world")
    record = make_record(known, answer, 0.1, yes_no=False, dataset=world)
    assert record["needs_retrieval"] is False and record["em"] == 1.0
    summary = summarize([record], dataset_has_support=True, yes_no=False, dataset=world)
    assert summary["retrieval_decisions"]["tp"] == 1
    plain = make_record(QAExample("q", "Q?", ["a"]), answer, 0.1, yes_no=False)
    assert "needs_retrieval" not in plain and "retrieval_decisions" not in summarize([plain], True, False)


def test_hops_and_subquery_decisions_reach_the_prediction_record(tmp_path: Path):
    make_world(TINY, tmp_path, Knowledge())
    examples = list(load_examples("world", tmp_path / "train.jsonl"))
    multi = next(e for e in examples if len(e.hops) == 2)
    record_in = next(r for r in map(json.loads, (tmp_path / "train.jsonl").read_text().splitlines())
                     if r["id"] == multi.id)
    assert [(h.entity, h.known) for h in multi.hops] == [
        (s["entity"], s["known"]) for s in record_in["question_decomposition"]]
    steps = [{"kind": "answer", "details": {"subquery": multi.decomposition[0], "decision": "retrieve"}},
             {"kind": "answer", "details": {"subquery": multi.decomposition[1], "decision": "parametric"}}]
    answer = {"answer": "x", "final_answer": "x", "retrievals": [{"query": multi.decomposition[0], "hits": []}],
              "steps": steps}
    record = make_record(multi, answer, 0.1, yes_no=False, dataset=dataset_spec("world"))
    assert record["hops"] == [{"entity": h.entity, "known": h.known} for h in multi.hops]
    assert [d["retrieve"] for d in record["decisions"]] == [True, False]
    # other datasets' records carry no hops; the sub-question decisions are any dataset's (DeepRAG's Figure 7)
    plain = make_record(next(iter(load_examples("musique", tmp_path / "train.jsonl"))), answer, 0.1, yes_no=False,
                        dataset=dataset_spec("musique"))
    assert "hops" not in plain and plain["decisions"] == record["decisions"]
