"""`dynrag reproduce world`: the runs on a tiny world's test split over its own index, the table,
the breakdown and the claim lines decided by tests on the runs' records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dynrag.cli import app
from dynrag.errors import ConfigError, DataError
from dynrag.reproduce.runs import ReproduceRequest, reproduce
from dynrag.reproduce.render import render
from dynrag.reproduce.world import world_runs, WorldTableOptions
from dynrag.methods.base import Answer, Retrieval, Step, Trace
from dynrag.methods.registry import parse_options
from dynrag.world.entities import generate
from dynrag.world.knowledge import Knowledge
from dynrag.world.make import make_world
from tests.reproduce.test_deeprag import checkpoints
from tests.world.fixtures import TINY


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("world")
    # More bank facts than TINY's four, so that the test split holds one- and two-hop questions the
    # model knows (all real facts are marked known).
    options = TINY.model_copy(update={"real_facts": 30})
    make_world(options, out, Knowledge("m", {f.id: "known" for f in generate(options).facts if f.real}))
    return out


class ScriptedWorldMethod:
    """Answers one-hop questions right (every method) and multi-hop ones right only for `single`;
    DRAGIN and FLARE retrieve only on questions that need it, the rest once each (closed book never);
    deeprag writes one decision per hop, retrieving exactly the unknown ones, except a stage-I
    checkpoint, which retrieves for every hop."""

    name = "scripted"

    def __init__(self, config, retriever, records):
        self.config, self.retriever, self.records = config, retriever, records

    def answer(self, question: str) -> Answer:
        r, method = self.records[question], self.config["method"]
        trace = Trace(question, method, "fake", {})
        hops = r["question_decomposition"]
        right = len(hops) == 1 or method == "single"
        final = r["answer"] if right else "unknown"
        if method == "deeprag":
            stage_one = "imi" in str(self.config.get("model"))
            for i, h in enumerate(hops, 1):
                retrieve = stage_one or h["known"] is False
                if retrieve:
                    trace.retrievals.append(Retrieval(h["question"], self.retriever.search(h["question"], 3)))
                trace.steps.append(Step("answer", h["answer"], h["answer"], 1, None, {
                    "step": i, "subquery": h["question"], "decision": "retrieve" if retrieve else "parametric"}))
        elif self.retriever is not None and (r["world"]["needs_retrieval"] or method not in ("dragin", "flare")):
            trace.retrievals.append(Retrieval(question, self.retriever.search(question, 3)))
        trace.steps.append(Step("generate", final, final, 1))
        return Answer(f"So the answer is {final}.", final, trace)


def factory(world: Path, built: list):
    records = {r["question"]: r for r in map(json.loads, (world / "test.jsonl").read_text().splitlines())}

    def make(config, retriever):
        built.append(config)
        return ScriptedWorldMethod(config, retriever, records)

    return make


def test_world_rows_are_valid_option_sets():
    runs = world_runs(WorldTableOptions(imitation="hf:a", calibration="hf:b"))
    assert [r.key for r in runs] == ["direct", "single", "fixed_length", "fixed_sentence", "flare", "dragin",
                                     "dragin_reference", "deeprag_untrained", "deeprag_imi", "deeprag"]
    assert {r.options.get("variant") for r in runs if r.method == "dragin"} == {"paper", "reference"}
    for run in runs:
        parse_options(run.method, run.options)


def test_reproduce_world_runs_the_test_split_over_the_worlds_index(tmp_path, world):
    built: list = []
    req = ReproduceRequest(table="world", world=world, out=tmp_path / "runs")
    report = reproduce(req, method_factory=factory(world, built), progress=False)
    assert len(built) == 8 and {c["dataset"] for c in built} == {"world"}
    assert all(c["data"] == str(world / "test.jsonl") for c in built)
    index = Path(report["request"].corpus)
    assert index.parent == tmp_path / "runs" / "world-index" and (index / "manifest.json").is_file()
    text = render(report)
    assert text.startswith("# A generated world (test split)\n") and "Δ" not in text
    # the method table: EM, F1, retrievals and the decision columns (no published column: no "ours")
    assert "| method | EM | F1 | retrievals/question | r/q all known | r/q needs retrieval |" in text
    # 31 questions: 13 one-hop (6 known), 10 two-hop (3 known: chains of real facts), 8 three-hop.
    # deeprag untrained retrieves the 37 unknown hops of the 57 exactly: hop precision, recall and MCC 1;
    # its later sub-questions write "#1" for the entity, so 22 of its 37 queries name it
    assert "| deeprag untrained | 0.419 | 0.419 | 1.19 | 0.00 | 1.68 | 0.595 | 1.000 | 1.000 | 1.000 | 1.000 |" in text
    assert "| FLARE | 0.419 | 0.419 | 0.71 | 0.00 | 1.00 | 1.000 | 1.000 | – | – | – |" in text
    assert "| DRAGIN (paper variant) | 0.419 | 0.419 | 0.71 | 0.00 | 1.00 |" in text
    # the breakdown: 13 one-hop questions answered by all, 18 multi-hop ones by single only
    assert ("| method | 1 hop (n=13) | 2 hops (n=10) | 3 hops (n=8) | all known (n=9) | needs retrieval (n=22) "
            "| known and unknown hops (n=8) |") in text
    # on the 8 chains with a known and an unknown hop, deeprag retrieves the 12 unknown hops alone
    assert "| deeprag untrained | 1.000 / 0.54 | 0.000 / 1.00 | 0.000 / 2.50 | 0.667 / 0.00 | 0.318 / 1.68 | 0.000 / 1.50 |" in text
    assert "| single retrieval | 1.000 / 1.00 | 1.000 / 1.00 | 1.000 / 1.00 | 1.000 / 1.00 | 1.000 / 1.00 |" in text
    # claim lines, each decided by a test on the runs' records: (i) holds, (ii) does not, (iii) not run, (iv) holds
    assert ("- (i) FLARE retrieves less on 1-hop questions the model knows than on those it needs to look up: "
            "0.00 vs 1.00 retrievals/question (6 known, 7 to look up); permutation (two groups), n 13, p 0.001: "
            "**holds**.") in text  # exact: 2 of the 1716 ways to split 13 questions 6 / 7 are as extreme
    assert ("- (i) FLARE retrieves less on 2-hop questions the model knows than on those it needs to look up: "
            "0.00 vs 1.00 retrievals/question (3 known, 7 to look up); permutation (two groups), n 10, p 0.017: "
            "**holds**.") in text  # 2 / C(10, 3) = 2 / 120
    assert ("- (ii) DRAGIN (paper variant) answers more multi-hop questions than single retrieval: EM 0.000 vs "
            "1.000; McNemar (exact), n 18, p 7.6e-06: **does not hold**.") in text  # 2 * 0.5^18
    assert "- (iii) DeepRAG stage II retrieves less than stage I: not run (give --option imitation=CKPT" in text
    assert ("- (iv) deeprag untrained retrieves for unknown hops and answers known ones (all questions): hop MCC "
            "1.000 (n 57, 95% bootstrap interval 1.000 to 1.000), table TP 37 FP 0 FN 0 TN 20; Fisher exact, n 57, "
            "p 8.3e-16: **holds**.") in text  # 1 / C(57, 20)

    again: list = []
    reproduce(req, method_factory=factory(world, again), progress=False)
    assert again == []  # resumed: every run finished


@pytest.mark.slow  # over a second of CPU: `make test` runs it, `make test-fast` does not
def test_both_checkpoints_add_the_stage_rows_and_the_stage_claim(tmp_path, world):
    specs = checkpoints(tmp_path, "imi", "coc")
    built: list = []
    req = ReproduceRequest(table="world", world=world, out=tmp_path / "runs",
                           options={"imitation": specs["imi"], "calibration": specs["coc"]})
    text = render(reproduce(req, method_factory=factory(world, built), progress=False))
    assert [(c["method"], c["model"]) for c in built][-2:] == [("deeprag", specs["imi"]), ("deeprag", specs["coc"])]
    # stage I retrieves every hop (57 over 31 questions), stage II only the 37 unknown ones, at the same EM;
    # the 20 known hops lie in 17 questions, more sign patterns than the 9,999 random flips, whose
    # smallest two-sided p is 2 / 10,000
    assert ("- (iii) DeepRAG stage II retrieves less than stage I: 1.19 vs 1.84 retrievals/question; paired "
            "permutation, n 31, p 0.0002: **holds**.") in text
    assert "- (iii) together (fewer retrievals, EM not worse): **holds**." in text
    assert "stage II question MCC (did not retrieve vs needed nothing): 1.000 (n 31" in text
    assert "- (iv) DeepRAG (stage II) retrieves for unknown hops" in text


def test_a_missing_world_is_a_clear_error(tmp_path, world):
    with pytest.raises(DataError, match="no such directory"):
        reproduce(ReproduceRequest(table="world", world=tmp_path / "nope", out=tmp_path / "r"), progress=False)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no world here"):
        reproduce(ReproduceRequest(table="world", world=tmp_path / "empty", out=tmp_path / "r"), progress=False)
    with pytest.raises(ConfigError, match="needs --world DIR"):
        reproduce(ReproduceRequest(table="world", out=tmp_path / "r"), progress=False)
    with pytest.raises(ConfigError, match=r"does not read a world \(world, world-figure8, deeprag-figure3"):
        reproduce(ReproduceRequest(table="dragin-table2", world=world, out=tmp_path / "r", run=False), progress=False)
    r = CliRunner().invoke(app, ["reproduce", "world", "--no-run", "--world", str(tmp_path / "nope")])
    assert r.exit_code == 1 and "no such directory" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(app, ["reproduce", "world", "--no-run", "--world", str(world), "--out", str(tmp_path / "r")])
    assert r.exit_code == 0 and "| DRAGIN (reference variant) | – |" in r.output and "(iii)" in r.output


def test_cost_lines_sum_the_rows_wall_time_and_name_untimed_rows():
    from dynrag.reproduce.world import DATASET, cost_lines, world_runs, WorldTableOptions

    runs = world_runs(WorldTableOptions())[:3]
    results = {(DATASET, runs[0].key): {"wall_seconds": 60.0}, (DATASET, runs[1].key): {"wall_seconds": 120.0}}
    assert cost_lines(runs, results) == ["", "Wall time of the 2 timed rows: 3.0 min in all."]
    results[(DATASET, runs[2].key)] = {"wall_seconds": None}
    assert cost_lines(runs, results)[1].endswith("(1 row(s) ran before runs recorded their wall time).")
    assert cost_lines(runs, {}) == []


def test_a_row_builds_its_run_config_once_and_parses_no_option_string(tmp_path, world, monkeypatch):
    """The command line is parsed before `reproduce`; each row's config is built from typed values."""
    import dynrag.config
    import dynrag.registry

    calls = {"load_run_config": 0, "parse_pairs": 0}

    def counted(name, real):
        def call(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)
        return call

    monkeypatch.setattr(dynrag.config, "load_run_config", counted("load_run_config", dynrag.config.load_run_config))
    monkeypatch.setattr(dynrag.config, "parse_pairs", counted("parse_pairs", dynrag.config.parse_pairs))
    monkeypatch.setattr(dynrag.registry, "parse_pairs", counted("parse_pairs", dynrag.registry.parse_pairs))
    req = ReproduceRequest(table="world", world=world, out=tmp_path / "runs", rows=["single", "flare"],
                           retriever_options={"backend": "numpy"})
    built: list = []
    reproduce(req, method_factory=factory(world, built), progress=False)
    assert len(built) == 2 and calls == {"load_run_config": 2, "parse_pairs": 0}


def test_skip_bad_reaches_every_rows_run_config(tmp_path, world, monkeypatch):
    import dynrag.config

    seen = []
    real = dynrag.config.load_run_config

    def capture(path, flags, *args, **kwargs):
        config = real(path, flags, *args, **kwargs)
        seen.append(config.skip_bad)
        return config

    monkeypatch.setattr(dynrag.config, "load_run_config", capture)
    req = ReproduceRequest(table="world", world=world, out=tmp_path / "runs", rows=["single"], skip_bad=True)
    reproduce(req, method_factory=factory(world, []), progress=False)
    assert seen == [True]
