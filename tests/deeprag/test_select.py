"""Imitation path selection (--select min|max|random): the pure choice, the whole-tree search, and
synth's records and resume (fast: scripted models, a real BM25 index)."""

import json
import random

import pytest

from dynrag.deeprag.search import SearchLimits, select_path, tree_search
from dynrag.deeprag.synth import Models, run_synth
from dynrag.deeprag.trajectory import read_trajectories
from dynrag.errors import ConfigError
from dynrag.methods.deeprag.narrative import NarrativeStep
from tests.deeprag.conftest import wiki_record
from tests.deeprag.test_synth import bench, knowing_model, request  # noqa: F401 (bench is a fixture)
from tests.fakes import ScriptedTree


def path(*decisions):
    return tuple(NarrativeStep(f"q{i}", d, "x") for i, d in enumerate(decisions)), "right"


def test_select_path_by_hand():
    # retrievals 1, 0, 2, 2, 0 in the order found
    found = [path(True, False), path(False), path(True, True), path(True, False, True), path(False, False)]
    assert select_path(found, "min") == 1  # the first of the two with 0
    assert select_path(found, "max") == 2  # the first of the two with 2
    draws = [select_path(found, "random", random.Random(s)) for s in range(40)]
    assert set(draws) == {0, 1, 2, 3, 4}  # every correct narrative can be drawn, not only the extremes
    assert draws == [select_path(found, "random", random.Random(s)) for s in range(40)]  # seeded: the same again
    with pytest.raises(ConfigError, match="--select 'most': choose one of min, max, random"):
        select_path(found, "most")
    with pytest.raises(ValueError, match="seeded"):
        select_path(found, "random")


def test_whole_tree_search_collects_every_correct_narrative_in_queue_order():
    tree = ScriptedTree(correct_path=(False, True), also_correct=[(True, False), (True, True)])
    first = tree_search(tree, SearchLimits(max_steps=4))
    assert [tuple(s.retrieve for s in p) for p, _ in first.correct] == [(False, True)]  # stops at the cheapest
    tree = ScriptedTree(correct_path=(False, True), also_correct=[(True, False), (True, True)])
    every = tree_search(tree, SearchLimits(max_steps=4), collect_all=True)
    # PR (cost 1, pushed before RP), RP (cost 1), RR (cost 2); PP was wrong
    assert [tuple(s.retrieve for s in p) for p, _ in every.correct] == [(False, True), (True, False), (True, True)]
    assert every.status == "found" and every.complete and every.queued == 0
    assert tuple(s.retrieve for s in every.steps) == (False, True)  # the result's own path is still the cheapest
    assert every.expanded == 7  # root, P, R, PP, PR, RP, RR: the whole tree of two hops
    cut = tree_search(ScriptedTree(correct_path=(False, True), also_correct=[(True, True)]),
                      SearchLimits(max_steps=4, max_nodes=5), collect_all=True)
    assert cut.status == "found" and not cut.complete and len(cut.correct) == 1  # found before the budget ran out


def retrieve_pattern(tmp_path):
    return {t.id: [s.retrieve for s in t.steps] for t in read_trajectories(tmp_path / "synth")}


def test_synth_select_max_keeps_the_costliest_correct_narrative_and_records_the_choice(tmp_path, bench):
    data, index = bench
    records = [wiki_record(i) for i in range(6)]
    known = {r["evidences"][0][0]: r["evidences"][0][2] for r in records[::2]}
    run_synth(request(tmp_path, data, select="max"), progress=False, models=Models(knowing_model(known), None, index))
    # known founders: PR and RR are both right; max keeps RR. Unknown ones: only RR is right.
    assert retrieve_pattern(tmp_path) == {f"q{i}": [True, True] for i in range(6)}
    manifest = json.loads((tmp_path / "synth" / "manifest.json").read_text())
    assert (manifest["select"], manifest["seed"], manifest["keep"]) == ("max", None, "path")
    line = json.loads((tmp_path / "synth" / "trajectories.jsonl").read_text().splitlines()[0])
    assert line["select"] == "max" and line["correct_paths"] == 2 and line["complete"] is True
    with pytest.raises(ConfigError, match="chosen with --select max, not --select min"):
        run_synth(request(tmp_path, data), progress=False, models=Models(knowing_model(known), None, index))
    with pytest.raises(ConfigError, match="--select 'fewest'"):
        run_synth(request(tmp_path / "other", data, select="fewest"), progress=False)


def test_synth_select_random_is_seeded_per_question_and_the_seed_is_part_of_the_config(tmp_path, bench):
    data, index = bench
    records = [wiki_record(i) for i in range(6)]
    known = {r["evidences"][0][0]: r["evidences"][0][2] for r in records}  # two correct narratives each
    patterns = []
    for seed in (3, 3):
        out = tmp_path / f"run{len(patterns)}"
        run_synth(request(out, data, select="random", seed=seed), progress=False,
                  models=Models(knowing_model(known), None, index))
        patterns.append(retrieve_pattern(out))
    assert patterns[0] == patterns[1]
    assert {tuple(p) for p in patterns[0].values()} == {(False, True), (True, True)}  # both were drawn
    with pytest.raises(ConfigError, match="--select random --seed 3, not --select random --seed 4"):
        run_synth(request(tmp_path / "run0", data, select="random", seed=4), progress=False,
                  models=Models(knowing_model(known), None, index))


def test_a_manifest_from_before_select_resumes_as_min(tmp_path, bench):
    data, index = bench
    lm = knowing_model({})
    run_synth(request(tmp_path, data, limit=2), progress=False, models=Models(lm, None, index))
    manifest = tmp_path / "synth" / "manifest.json"
    old = {k: v for k, v in json.loads(manifest.read_text()).items() if k not in ("select", "seed", "keep")}
    manifest.write_text(json.dumps(old))
    summary = run_synth(request(tmp_path, data, limit=3), progress=False, models=Models(lm, None, index))
    assert summary["questions"] == 3
    with pytest.raises(ConfigError, match="chosen with --select min, not --select max"):
        run_synth(request(tmp_path, data, limit=3, select="max"), progress=False, models=Models(lm, None, index))


def test_synth_keeps_siblings_or_every_correct_narrative_when_asked(tmp_path, bench):
    data, index = bench
    known = {wiki_record(0)["evidences"][0][0]: wiki_record(0)["evidences"][0][2]}
    run_synth(request(tmp_path / "s", data, limit=1, keep="siblings"), progress=False,
              models=Models(knowing_model(known), None, index))
    t = read_trajectories(tmp_path / "s" / "synth")[0]
    assert [s.retrieve for s in t.steps] == [False, True] and [o.retrieve for o in t.others] == [True, False]
    assert t.others[0].answer == t.steps[0].answer  # from passages it finds the founder it knew
    assert t.others[0].passages and t.others[1].answer == "Nowhere Town"
    run_synth(request(tmp_path / "a", data, limit=1, keep="all-correct"), progress=False,
              models=Models(knowing_model(known), None, index))
    t = read_trajectories(tmp_path / "a" / "synth")[0]
    assert [[s.retrieve for s in steps] for steps, _ in t.correct] == [[False, True], [True, True]]
    assert [s.retrieve for s in t.steps] == [False, True]  # still the cheapest
