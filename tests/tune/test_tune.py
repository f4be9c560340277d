"""`dynrag tune` through the real command, each trial a real eval run with a method double whose
EM peaks at theta = 1 (no model is loaded)."""

import json
import sqlite3

import pytest
import yaml

from dynrag.eval import runner
from tests.cli_inprocess import run_in_process
from tests.eval import fixtures as fx
from tests.tune.doubles import InterruptOnce, peaked


@pytest.fixture
def dev(tmp_path, monkeypatch):
    rows = fx.qa_rows(8)
    data = fx.write_jsonl(tmp_path / "dev.jsonl", rows)
    monkeypatch.setattr(runner, "default_method_factory", peaked(rows))
    return rows, data


def tune(data, out, *extra):
    return run_in_process("tune", "--dataset", "jsonl", "--data", data, "--corpus", "contexts", "--method", "dragin",
                          "--workers", "1", "--out", out, *extra)


def study_trials(out):
    with sqlite3.connect(out / "study.db") as db:
        return db.execute("SELECT number, state FROM trials ORDER BY number").fetchall()


def predictions(run_dir):
    return [json.loads(line)["id"] for line in (run_dir / "predictions.jsonl").read_text().splitlines()]


def test_a_grid_tune_finds_the_peak_and_best_yaml_runs_as_an_eval_config(tmp_path, dev):
    rows, data = dev
    out = tmp_path / "tune"
    r = tune(data, out, "--space", "theta=0.5:1.5:0.25", "--trials", "9", "--sampler", "grid",
             "--also", "retrievals_per_question", "--report")
    assert r.returncode == 0, r.stderr
    assert "the grid has 5 points: 5 trials, not 9" in r.stderr
    assert "Best: trial" in r.stdout and "em 1 at theta=1" in r.stdout and "Pareto front" in r.stdout
    assert [s for _, s in study_trials(out)] == ["COMPLETE"] * 5
    assert sorted(p.name for p in (out / "trials").iterdir()) == ["0", "1", "2", "3", "4"]
    assert (out / "tune.png").read_bytes()[:4] == b"\x89PNG" and (out / "report.md").read_text() == r.stdout
    best = yaml.safe_load((out / "best.yaml").read_text())
    assert best["options"]["theta"] == 1.0 and "limit" not in best and "out" not in best
    report = r.stdout
    r = run_in_process("eval", "--config", out / "best.yaml", "--out", tmp_path / "tuned", "--workers", "1")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "tuned" / "summary.json").read_text())["em"] == 1.0
    # the same command again: the study already holds its trials
    again = tune(data, out, "--space", "theta=0.5:1.5:0.25", "--trials", "9", "--sampler", "grid",
                 "--also", "retrievals_per_question")
    assert again.returncode == 0 and len(study_trials(out)) == 5
    # the report alone, from --out
    alone = run_in_process("tune", "--out", out, "--report")
    assert alone.returncode == 0 and alone.stdout == report


def test_the_best_at_an_end_of_the_range_is_said_plainly(tmp_path, dev):
    _, data = dev
    r = tune(data, tmp_path / "t", "--space", "theta=1.0:2.0:0.5", "--trials", "3", "--sampler", "grid", "--report")
    assert r.returncode == 0, r.stderr
    assert "The best theta (1) is at the low end of the space (theta=1:2:0.5)" in r.stdout


def test_when_every_trial_ties_the_report_says_so_instead_of_pointing_at_an_end(tmp_path, dev):
    _, data = dev
    # theta 0.9 and 1.1 sit as far from the double's peak (1.0): the same answers, the same EM
    r = tune(data, tmp_path / "t", "--space", "theta=0.9,1.1", "--trials", "2", "--sampler", "grid", "--report")
    assert r.returncode == 0, r.stderr
    assert "Both trials tied at em 0.875: the ends of the range say nothing" in r.stdout
    assert "end of the space" not in r.stdout and "widen the range" not in r.stdout + r.stderr
    assert "Both trials tied" in r.stderr  # the note reaches the terminal without --report too


def test_tpe_with_a_seed_and_two_parameters(tmp_path, dev):
    _, data = dev
    r = tune(data, tmp_path / "t", "--space", "theta=0.3:2.0", "--space", "query_words=10,20,30", "--trials", "4",
             "--seed", "0", "--report")
    assert r.returncode == 0, r.stderr
    assert len(study_trials(tmp_path / "t")) == 4 and "| trial | state | theta | query_words | em |" in r.stdout


@pytest.mark.parametrize("pruner", ["median", pytest.param("halving", marks=pytest.mark.slow)])  # one pruner in test-fast
def test_pruning_stops_trials_that_fall_behind_and_saves_questions(tmp_path, dev, pruner):
    _, data = dev
    out = tmp_path / "t"
    r = tune(data, out, "--space", "theta=0.5:1.5:0.25", "--trials", "5", "--sampler", "grid",
             "--prune", pruner, "--prune-every", "2", "--prune-startup", "2", "--report")
    assert r.returncode == 0, r.stderr
    states = [s for _, s in study_trials(out)]
    assert states.count("PRUNED") >= 1 and states.count("COMPLETE") + states.count("PRUNED") == 5
    answered = sum(len(predictions(d)) for d in (out / "trials").iterdir())
    assert answered < 5 * 8
    assert f"questions answered in all: {answered}" in r.stdout


def test_ctrl_c_leaves_the_study_consistent_and_the_trial_resumes_its_run_directory(tmp_path, dev, monkeypatch):
    rows, data = dev
    out = tmp_path / "t"
    monkeypatch.setattr(runner, "default_method_factory",
                        InterruptOnce(peaked(rows), rows[5]["question"], str(tmp_path / "interrupted")))
    args = ("--space", "theta=0.5,1.0,1.5", "--trials", "3", "--sampler", "grid")
    r = tune(data, out, *args)
    assert r.returncode == 130 and "interrupted" in r.stderr
    assert study_trials(out) == [(0, "FAIL"), (1, "WAITING")]  # the interrupted trial, enqueued again
    assert len(predictions(out / "trials" / "0")) == 5
    r = tune(data, out, *args)
    assert r.returncode == 0, r.stderr
    assert "trial 1 (resumes trial 0)" in r.stderr and "resuming" in r.stderr
    states = study_trials(out)
    assert [s for _, s in states].count("COMPLETE") == 3 and len(states) == 4
    dirs = sorted(p.name for p in (out / "trials").iterdir())
    assert dirs == ["0", "2", "3"]
    for d in dirs:
        ids = predictions(out / "trials" / d)
        assert sorted(ids) == sorted(r["id"] for r in rows)  # each question once


def test_a_run_configuration_file_is_the_base_of_every_trial(tmp_path, dev):
    _, data = dev
    base = tmp_path / "base.yaml"
    base.write_text(f"dataset: jsonl\ndata: {data}\ncorpus: contexts\nmethod: dragin\noptions:\n  variant: reference\n"
                    "  query_words: 12\n")
    out = tmp_path / "t"
    r = run_in_process("tune", "--config", base, "--space", "theta=0.9,1.1", "--trials", "2", "--sampler", "grid",
                       "--workers", "1", "--out", out)
    assert r.returncode == 0, r.stderr
    for d in (out / "trials").iterdir():
        options = json.loads((d / "config.json").read_text())["options"]
        assert (options["variant"], options["query_words"]) == ("reference", 12) and options["theta"] in (0.9, 1.1)
    best = yaml.safe_load((out / "best.yaml").read_text())
    assert best["options"]["variant"] == "reference"
    tuned = json.loads((out / "tuned.json").read_text())
    assert tuned["fixed"] == {"variant": "reference", "query_words": 12} and set(tuned["options"]) == {"theta"}


def test_skip_bad_skips_a_malformed_dev_record_in_every_trial(tmp_path, dev):
    rows, data = dev
    with open(data, "a", encoding="utf-8") as f:
        f.write("{not json\n")
        f.write(json.dumps(rows[0] | {"id": "extra"}) + "\n")  # after the bad line: not the file's cut-off tail
    refused = tune(data, tmp_path / "a", "--space", "theta=1.0", "--trials", "1", "--sampler", "grid")
    assert refused.returncode != 0 and f"{data}:9" in refused.stderr
    out = tmp_path / "b"
    r = tune(data, out, "--space", "theta=1.0", "--trials", "1", "--sampler", "grid", "--skip-bad")
    assert r.returncode == 0, r.stderr
    assert len(predictions(out / "trials" / "0")) == 9
