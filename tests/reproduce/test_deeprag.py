"""`dynrag reproduce deeprag-table2`: which runs, which models, the table."""

import json
from pathlib import Path

import pytest

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


def test_table1_decides_each_trained_stage_against_each_baseline(tmp_path):
    from dynrag.reproduce.catalog import open_table
    from dynrag.reproduce.deeprag import TABLE1_BASELINES, table1_claims

    specs = checkpoints(tmp_path, "imi", "coc")
    table = open_table("deeprag-table1", {"imitation": specs["imi"], "calibration": specs["coc"]})
    results = {}
    for run in table.runs:
        if run.dataset == "hotpotqa" and not run.published_only:
            folder = tmp_path / run.key
            folder.mkdir()
            right = int(run.key == "deeprag")  # only stage II answers, on all six questions
            (folder / "predictions.jsonl").write_text("".join(json.dumps({"id": i, "em": right}) + "\n" for i in range(6)))
            results[("hotpotqa", run.key)] = {"run_dir": str(folder)}
    lines = [t for t in table1_claims(table.runs, results) if t.startswith("- hotpotqa")]
    stage_two = [t for t in lines if "DeepRAG − " in t]
    assert len(stage_two) == len(TABLE1_BASELINES) + 1  # each baseline, and stage I
    assert all("+1.000" in t and "p = 0.0312" in t and "**holds**" in t for t in stage_two)  # 2 / 2^6
    ties = [t for t in lines if "DeepRAG − " not in t]
    assert len(ties) == len(TABLE1_BASELINES) + 2 and all("**undetermined**" in t for t in ties)
    assert table1_claims(table.runs, {}) == []
