"""`dynrag eval --shard I/K`: the I-th of K interleaved shards, searching every question's pooled
contexts as the whole run would; the shard is part of the run's identity."""

import json

import pytest

from dynrag.errors import ConfigError
from dynrag.eval.runner import run_eval
from dynrag.io.rundir import read_predictions
from tests.eval import fixtures as fx
from tests.eval.test_runner import request, rows_and_answers
from tests.fakes import method_factory


def test_a_shard_answers_its_questions_over_the_whole_rows_contexts(tmp_path):
    rows, answers = rows_and_answers(5)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    summary = run_eval(request(tmp_path, data, shard="2/2"), method_factory=method_factory(answers), progress=False)
    run = tmp_path / "run"
    assert [p["id"] for p in read_predictions(run)] == ["q1", "q3"]
    assert summary["n"] == 2 and summary["shard"] == "2/2" and summary["em"] == 0.0  # odd questions: wrong
    assert json.loads((run / "config.json").read_text())["shard"] == "2/2"
    manifest = json.loads((run / "contexts-index" / "manifest.json").read_text())
    assert manifest["passage_count"] == 6  # the five mills and the shared paragraph: every question's, not two
    # the same directory under another shard is another run
    with pytest.raises(ConfigError, match=r'different config \(shard: "2/2" -> "1/2"'):
        run_eval(request(tmp_path, data, shard="1/2"), method_factory=method_factory(answers), progress=False)


def test_a_whole_run_records_no_shard_so_earlier_runs_resume(tmp_path):
    rows, answers = rows_and_answers(2)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    run_eval(request(tmp_path, data), method_factory=method_factory(answers), progress=False)
    assert "shard" not in json.loads((tmp_path / "run" / "config.json").read_text())


def test_a_bad_shard_names_the_flag(tmp_path):
    from tests.cli_inprocess import run_in_process

    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(2))
    shown = run_in_process("eval", "--dataset", "jsonl", "--data", data, "--method", "single", "--out", tmp_path / "run",
                           "--shard", "3/2")
    assert shown.returncode != 0
    assert "--shard: I must be 1 to K, and K at least 1" in shown.stderr
    assert not (tmp_path / "run").exists()
    # more shards than questions: the empty shard says so before anything is written
    empty = run_in_process("eval", "--dataset", "jsonl", "--data", data, "--method", "direct", "--out", tmp_path / "run",
                           "--shard", "3/3")
    assert empty.returncode != 0 and "--shard 3/3: no questions in this shard of 2" in empty.stderr
