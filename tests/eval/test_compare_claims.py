"""`dynrag compare --claims`: the claimed pairs among runs, decided on shared questions."""

import json

import pytest
from typer.testing import CliRunner

from dynrag.cli import app
from dynrag.eval.compare import labels
from dynrag.eval.compare_claims import claim_lines, claimed_pairs, decide_pairs


def write_run(path, method, right, dataset="hotpotqa", sha="abc"):
    """A run directory of `method` whose question i is right when right[i]."""
    path.mkdir(parents=True)
    (path / "predictions.jsonl").write_text("".join(json.dumps({"id": f"q{i}", "em": float(r)}) + "\n"
                                                    for i, r in enumerate(right)))
    return {"run": str(path), "name": path.name, "method": method, "dataset": dataset, "data_sha256": sha}


def test_pairs_follow_the_claims_and_stay_within_one_data_file(tmp_path):
    runs = [write_run(tmp_path / "d", "dragin", [1]), write_run(tmp_path / "f", "flare", [1]),
            write_run(tmp_path / "s", "single", [1]), write_run(tmp_path / "o", "single", [1], sha="other")]
    # DRAGIN above flare and single (not the run of another file); FLARE above single only
    assert claimed_pairs(runs) == [(0, 1), (0, 2), (1, 2)]


def test_each_pair_is_decided_by_mcnemar_on_the_questions_both_answered(tmp_path):
    dragin = write_run(tmp_path / "d", "dragin", [1] * 9 + [0] + [1])
    single = write_run(tmp_path / "s", "single", [0] * 10)  # q10 unanswered: not paired
    verdicts = decide_pairs([dragin, single], labels([dragin, single]))
    assert len(verdicts) == 1
    v = verdicts[0]
    assert (v.better, v.worse, v.tested.n) == ("dragin", "single", 10)
    assert v.better_em == pytest.approx(0.9) and v.worse_em == 0.0
    assert v.tested.p == pytest.approx(2 / 2 ** 9) and v.tested.verdict == "holds"
    text = claim_lines(verdicts)
    assert "- hotpotqa: dragin above single: EM 0.900 vs 0.000, McNemar (exact), n 10, p 0.00391: **holds**" in text


def test_compare_claims_through_the_cli(tmp_path, monkeypatch):
    from dynrag.eval import runner
    from tests.eval import fixtures as fx
    from tests.fakes import method_factory

    rows = fx.qa_rows(4)
    monkeypatch.setattr(runner, "default_method_factory", method_factory(
        {r["question"]: (r["answers"][0] if i < 2 else "nowhere") for i, r in enumerate(rows)}))
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    for method in ("dragin", "flare"):
        r = CliRunner().invoke(app, ["eval", "--dataset", "jsonl", "--data", str(data), "--corpus", "contexts",
                                     "--method", method, "--out", str(tmp_path / method)])
        assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["compare", str(tmp_path / "dragin"), str(tmp_path / "flare"), "--claims"])
    assert r.exit_code == 0, r.output
    # the fake answers alike whatever the method: no discordant question
    assert "- jsonl: dragin above flare: EM 0.500 vs 0.500, McNemar (exact), n 4, p 1: **undetermined**" in r.stdout
    r = CliRunner().invoke(app, ["compare", str(tmp_path / "dragin"), str(tmp_path / "flare")])
    assert "McNemar" not in r.stdout
