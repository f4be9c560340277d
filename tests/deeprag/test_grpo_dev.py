"""GRPO's held-out checks (deeprag/grpo_dev.py): when they fall, what they write, and that a kill
neither loses nor repeats one."""

import json

import pytest

from dynrag.datasets.examples import QAExample
from dynrag.deeprag import grpo_dev
from dynrag.deeprag.grpo import GrpoOptions, GrpoJobOptions, run_grpo
from dynrag.deeprag.grpo_dev import DevCheck, dev_summary, load_dev_check, read_dev_log, refuse_overlap
from dynrag.errors import ConfigError
from dynrag.retrieval.base import Hit
from tests.cli_inprocess import run_in_process
from tests.deeprag.conftest import wiki_record, write_wiki
from tests.fakes import FakeRetriever


def question(i: int) -> QAExample:
    return QAExample(id=f"q{i}", question=f"question {i}?", answers=["a"])


def write_dev(path, first: int = 10, n: int = 3):
    path.write_text(json.dumps([wiki_record(i) for i in range(first, first + n)]), encoding="utf-8")
    return path


def test_a_check_falls_at_step_zero_every_n_steps_and_at_the_last():
    check = DevCheck([question(1)], every=3)
    assert [s for s in range(0, 8) if check.due(s, total=7)] == [0, 3, 6, 7]
    with pytest.raises(ConfigError, match="dev-every"):
        DevCheck([question(1)], every=0)
    with pytest.raises(ConfigError, match="no questions"):
        DevCheck([], every=2)


def test_a_checked_step_is_summarised_as_means_per_question():
    record = {"step": 4, "questions": [
        {"id": "a", "em": 1.0, "f1": 1.0, "retrievals": 2, "subquestions": 3},
        {"id": "b", "em": 0.0, "f1": 0.5, "retrievals": 0, "subquestions": 1},
    ]}
    assert dev_summary(record) == {"step": 4, "n": 2, "em": 0.5, "f1": 0.75, "retrievals": 1.0, "subquestions": 2.0}


def test_a_dev_question_that_is_also_trained_on_is_refused():
    with pytest.raises(ConfigError, match="shares 1 question"):
        refuse_overlap(DevCheck([question(1), question(2)], 1), [question(2), question(3)])
    refuse_overlap(DevCheck([question(1)], 1), [question(2)])


@pytest.mark.slow  # over a second of CPU: `make test` runs it, `make test-fast` does not
def test_a_run_killed_during_a_check_resumes_it_and_writes_each_checked_step_once(tmp_path, tiny_model_dir, monkeypatch):
    retriever = FakeRetriever([Hit("p1", "Ada Byrne", "Ada Byrne was born in Tessaly.", 1.0)])
    train = write_wiki(tmp_path / "train.json", 4)
    dev = load_dev_check("2wikimultihopqa", write_dev(tmp_path / "dev.json"), None, 1, console=None)
    options = GrpoOptions(method="full", lr=1e-3, batch_size=2, group=2, max_new_tokens=12, max_subqueries=2, threads=1,
                          shots=0, save_every=1)
    req = GrpoJobOptions(dataset="2wikimultihopqa", data=train, out=tmp_path / "grpo", model=f"hf:{tiny_model_dir}", options=options, dev=dev)
    real, calls = grpo_dev.answer_greedily, []

    def dies_at_the_last_check(policy, questions):
        calls.append(1)
        if len(calls) == 3:  # steps 0 and 1 are written; the check after step 2 dies
            raise KeyboardInterrupt
        return real(policy, questions)

    monkeypatch.setattr(grpo_dev, "answer_greedily", dies_at_the_last_check)
    with pytest.raises(KeyboardInterrupt):
        run_grpo(req, progress=False, retriever=retriever)
    assert [r["step"] for r in read_dev_log(req.out)] == [0, 1]
    monkeypatch.setattr(grpo_dev, "answer_greedily", real)
    report = run_grpo(req, progress=False, retriever=retriever)

    logged = read_dev_log(req.out)
    assert [r["step"] for r in logged] == [0, 1, 2]
    assert all([q["id"] for q in r["questions"]] == ["q10", "q11", "q12"] for r in logged)
    first = logged[0]["questions"][0]
    assert {"em", "f1", "retrievals", "subquestions", "answer"} <= first.keys() and first["subquestions"] <= 2
    assert [d["step"] for d in report["dev"]] == [0, 1, 2]
    assert (req.out / "grpo_dev.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_other_dev_questions_in_the_same_out_are_refused(tmp_path):
    (tmp_path / "dev_log.jsonl").write_text(json.dumps({"step": 0, "questions": [{"id": "q1"}]}) + "\n")
    with pytest.raises(ConfigError, match="other dev questions"):
        grpo_dev.DevLog(tmp_path, DevCheck([question(2)], 1))


@pytest.mark.slow  # over a second of CPU: `make test` runs it, `make test-fast` does not
def test_train_grpo_takes_its_dev_check_from_the_command_line(tmp_path, tiny_model_dir):
    train = write_wiki(tmp_path / "train.json", 2)
    common = ["train", "grpo", "--model", f"hf:{tiny_model_dir}", "--dataset", "2wikimultihopqa", "--data", train,
              "--questions-per-step", "2", "--group", "2", "--max-steps", "1", "--threads", "1", "--method", "full",
              "--option", "max_new_tokens=12", "--option", "shots=0", "--no-progress"]
    refused = run_in_process(*common, "--out", tmp_path / "same", "--dev-data", train)
    assert refused.returncode != 0 and "shares 2 question" in refused.stderr and "Traceback" not in refused.stderr
    out = tmp_path / "grpo"
    result = run_in_process(*common, "--out", out, "--dev-data", write_dev(tmp_path / "dev.json"), "--dev-limit", "2")
    assert result.returncode == 0, result.stderr
    assert [(d["step"], d["n"]) for d in json.loads(result.stdout)["dev"]] == [(0, 2), (1, 2)]
