"""`dynrag reproduce deeprag-table2|deeprag-figure5|deeprag-figure6`: which runs, which models, the table and the figures' average rows."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dynrag.cli import app
from dynrag.errors import ConfigError
from dynrag.reproduce.runs import ReproduceRequest, reproduce
from dynrag.reproduce.render import render
from dynrag.eval.summary import summarize
from tests.eval import fixtures as fx
from tests.fakes import method_factory as factory


def checkpoints(tmp_path: Path, *names: str) -> dict[str, str]:
    """Model specs of stand-ins for `dynrag train` outputs trained from the bundled model (specs
    are checked before a run is written; the CoT baseline is checked to be of the same base)."""
    from dynrag.lm.loader import resolve_model

    specs = {}
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
        (tmp_path / name / "deeprag.json").write_text(json.dumps({"stage": "imitation",
                                                                   "base_model": resolve_model("bundled")}))
        specs[name] = f"hf:{tmp_path / name}"
    return specs


def answers():
    return {fx.HOTPOT[0]["question"]: fx.HOTPOT[0]["answer"], fx.HOTPOT[1]["question"]: "no",
            fx.POPQA_JSONL[0]["question"]: "engineer", fx.POPQA_JSONL[1]["question"]: "Spain",
            fx.GENERIC[0]["question"]: "Lyon", fx.GENERIC[1]["question"]: "1901"}


def test_retrievals_are_split_by_whether_the_answer_was_right():
    preds = [{"answers": ["a"], "final_answer": "a", "prediction": "a", "retrievals": 1, "generated_tokens": 1, "seconds": 1.0},
             {"answers": ["b"], "final_answer": "x", "prediction": "x", "retrievals": 2, "generated_tokens": 1, "seconds": 3.0},
             {"answers": ["c"], "final_answer": "y", "prediction": "y", "retrievals": 5, "generated_tokens": 1, "seconds": 2.0}]
    s = summarize(preds, dataset_has_support=False, yes_no=False)
    assert (s["retrievals_per_question"], s["retrievals_when_correct"], s["retrievals_when_incorrect"]) == (
        pytest.approx(8 / 3, abs=1e-6), 1.0, 3.5)
    assert s["seconds_per_question"] == 2.0
    assert summarize(preds[:1], False, False)["retrievals_when_incorrect"] is None  # nothing on that side


def test_table2_runs_every_method_on_popqa_and_webquestions_as_generic_jsonl(tmp_path):
    specs = checkpoints(tmp_path, "imi", "coc")
    popqa = fx.write_jsonl(tmp_path / "popqa.jsonl", fx.POPQA_JSONL)
    built = []
    req = ReproduceRequest(table="deeprag-table2", data={"popqa": popqa}, out=tmp_path / "runs", limit=2,
                           options={"imitation": specs["imi"], "calibration": specs["coc"]})
    report = reproduce(req, method_factory=factory(answers(), built=built), progress=False)
    assert sorted(c["method"] for c, _, _ in built) == ["deeprag", "deeprag", "deeprag", "direct", "dragin", "flare", "single"]
    assert {c["dataset"] for c, _, _ in built} == {"popqa"}
    assert "--data webquestions=PATH" in report["missing"]["webquestions"]
    text = render(report)
    # the fake retrieves once per question except without a retriever (CoT); the first answer is right
    # PopQA: ours only (the published cells are WebQuestions')
    assert "| CoT (direct) | 0.500 | 0.00 | 0.00 | 0.00 |" in text and "| DeepRAG | 0.500 | 1.00 | 1.00 | 1.00 |" in text
    assert "| DeepRAG | – | 0.327 | – | – | 0.28 | – | – | 0.12 | – | – | 0.36 | – | – | 0.50 | – |" in text
    assert "WebQuestions, which is not among the data here" in text and "`--data webquestions=FILE`" in text

    web = fx.write_jsonl(tmp_path / "webq.jsonl", fx.GENERIC)
    more = []
    req = ReproduceRequest(table="deeprag-table2", data={"webquestions": web}, out=tmp_path / "runs", limit=2,
                           options={"calibration": specs["coc"]}, rows=["deeprag"])
    text = render(reproduce(req, method_factory=factory(answers(), built=more), progress=False))
    assert [(c["dataset"], c["method"]) for c, _, _ in more] == [("jsonl", "direct"), ("jsonl", "deeprag")]  # CoT first
    assert more[1][0]["model"] == specs["coc"]
    assert "| DeepRAG | 0.500 | 0.327 | +0.173 | 1.00 | 0.28 | +0.72 | 1.00 | 0.12 | +0.88 |" in text


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
    assert [s.key for s in only["table"].runs] == ["imi_max", "imi_max"]


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
