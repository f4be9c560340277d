"""`dynrag reproduce deeprag-figure5|deeprag-figure6`: one row per checkpoint, on the benchmarks or
a world, the figures' average rows and the paper's readings decided by paired tests."""

import pytest
from typer.testing import CliRunner

from dynrag.cli import app
from dynrag.errors import ConfigError
from dynrag.reproduce.render import render
from dynrag.reproduce.runs import ReproduceRequest, reproduce
from tests.eval import fixtures as fx
from tests.fakes import method_factory as factory
from tests.reproduce.test_deeprag import answers, checkpoints
from tests.reproduce.test_world import factory as world_factory, world  # noqa: F401  (world: a fixture)


def test_figure5_compares_the_stage_one_checkpoints_of_each_selection(tmp_path):
    specs = checkpoints(tmp_path, "imi-min", "imi-max", "imi-random")
    built = []
    req = ReproduceRequest(table="deeprag-figure5", data={"hotpotqa": fx.write_all(tmp_path)["hotpotqa"]},
                           out=tmp_path / "runs", limit=2,
                           options={"min": specs["imi-min"], "max": specs["imi-max"], "random": specs["imi-random"]})
    report = reproduce(req, method_factory=factory(answers(), built=built), progress=False)
    assert [(c["method"], c["model"], c["options"]["decision"]) for c, _, _ in built] == [
        ("deeprag", specs["imi-min"], "generate"), ("deeprag", specs["imi-max"], "generate"),
        ("deeprag", specs["imi-random"], "generate")]
    text = render(report)
    assert "| most retrievals (max) | 0.500 |" in text and "EM paper" not in text
    # the figure's bars: each row averaged over the datasets it ran on (only HotpotQA here)
    assert "### Average over the datasets (what the figure plots)" in text
    assert "| most retrievals (max) | hotpotqa | 0.500 |" in text
    # only the given checkpoints make rows
    only = reproduce(ReproduceRequest(table="deeprag-figure5", data={}, run=False, options={"max": specs["imi-max"]},
                                      out=tmp_path / "r2"), progress=False)
    assert [s.key for s in only["table"].runs] == ["imi_max"] * 3  # HotpotQA, 2Wiki, a world
    assert [ds for ds in only["datasets"]] == ["hotpotqa", "2wikimultihopqa"]  # no --world: the benchmarks


def test_figure6_compares_the_stage_two_checkpoints_of_each_pair_mode(tmp_path):
    specs = checkpoints(tmp_path, "optimal", "nodes", "sentence", "response")
    built = []
    req = ReproduceRequest(table="deeprag-figure6", data={"hotpotqa": fx.write_all(tmp_path)["hotpotqa"]},
                           out=tmp_path / "runs", limit=2,
                           options={"optimal": specs["optimal"], "all_nodes": specs["nodes"],
                                    "sentence_order": specs["sentence"], "response": specs["response"]})
    report = reproduce(req, method_factory=factory(answers(), built=built), progress=False)
    assert [c["model"] for c, _, _ in built] == [specs[n] for n in ("optimal", "nodes", "sentence", "response")]
    assert "| sentence-level order (sentence-order) | 0.500 |" in render(report)


def test_the_ablations_need_a_checkpoint_and_name_the_options(tmp_path):
    with pytest.raises(ConfigError, match="deeprag-figure5 compares checkpoints: give at least one of --option min=MODEL"):
        reproduce(ReproduceRequest(table="deeprag-figure5", run=False, out=tmp_path), progress=False)
    with pytest.raises(ConfigError, match="all-nodes|all_nodes"):
        reproduce(ReproduceRequest(table="deeprag-figure6", run=False, out=tmp_path, options={"all-nodes": "x"}),
                  progress=False)
    r = CliRunner().invoke(app, ["reproduce", "deeprag-figure6", "--no-run", "--option", "best=hf:x"])
    assert r.exit_code == 1 and "best" in r.output and "Traceback" not in r.output


def test_figure5_on_a_world_runs_its_test_split_with_the_decision_columns_and_claims(tmp_path, world):
    specs = checkpoints(tmp_path, "imi-min", "max")
    built: list = []
    req = ReproduceRequest(table="deeprag-figure5", world=world, out=tmp_path / "runs",
                           options={"min": specs["imi-min"], "max": specs["max"]})
    report = reproduce(req, method_factory=world_factory(world, built), progress=False)
    assert [(c["dataset"], c["model"]) for c in built] == [("world", specs["imi-min"]), ("world", specs["max"])]
    assert report["datasets"] == ["world"] and "hotpotqa" not in report["missing"]
    text = render(report)
    assert "| method | EM | F1 | retrievals/question | r/q all known | r/q needs retrieval | hop MCC |" in text
    # the scripted stage-I model ("imi" in its path) retrieves every one of the 57 hops of the 31
    # questions; the other retrieves the 37 unknown hops only; both answer the 13 one-hop questions
    assert "| DeepRAG-Imi, fewest retrievals (min) | 0.419 | 0.419 | 1.84 |" in text
    assert "| most retrievals (max) | 0.419 | 0.419 | 1.19 | 0.00 | 1.68 | 1.000 |" in text
    assert "| most retrievals (max) | world | 0.419 | 0.419 | 1.19 |" in text  # the average row
    assert ("- world: the fewest-retrieval narratives train a better reader: DeepRAG-Imi, fewest retrievals (min) − "
            "most retrievals (max) on em = +0.000") in text
    line = next(x for x in text.splitlines() if "they train one that retrieves less" in x)
    assert "on retrievals = -0.645" in line and line.endswith("**does not hold**.")  # min retrieves more here


def test_figure6_claims_name_each_pair_mode(tmp_path, world):
    specs = checkpoints(tmp_path, "optimal", "sentence-imi")  # the second retrieves every hop
    req = ReproduceRequest(table="deeprag-figure6", world=world, out=tmp_path / "runs",
                           options={"optimal": specs["optimal"], "sentence_order": specs["sentence-imi"]})
    text = render(reproduce(req, method_factory=world_factory(world, []), progress=False))
    line = next(x for x in text.splitlines() if "sentence-order pairs lean on memory" in x)
    assert "on retrievals = -0.645" in line and line.endswith("**does not hold**.")
    assert "all nodes (all-nodes)" not in text and "train a better reader" in text  # rows not given: no row, no claim


def test_the_world_and_the_benchmarks_are_not_mixed(tmp_path, world):
    specs = checkpoints(tmp_path, "imi")
    with pytest.raises(ConfigError, match="--dataset 'hotpotqa': with --world, deeprag-figure5 runs on the world"):
        reproduce(ReproduceRequest(table="deeprag-figure5", world=world, datasets=["hotpotqa"], run=False,
                                   out=tmp_path, options={"min": specs["imi"]}), progress=False)
    with pytest.raises(ConfigError, match="--dataset world: give --world DIR"):
        reproduce(ReproduceRequest(table="deeprag-figure6", datasets=["world"], run=False, out=tmp_path,
                                   options={"optimal": specs["imi"]}), progress=False)
