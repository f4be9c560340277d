"""A run's wall time: sessions kept in timing.json across resumes, summed in the summary; the
clock is a test double, so no figure depends on how fast this machine is."""

from __future__ import annotations

import json

from dynrag.eval.runner import run_eval
from dynrag.eval.timing import TIMING, SessionClock, read_sessions, wall_figures
from tests.eval import fixtures as fx
from tests.eval.fixtures import eval_plan
from tests.fakes import method_factory


class Ticks:
    """A clock that reads 10 s further on at every call."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        self.now += 10.0
        return self.now


def test_each_session_keeps_one_entry_rewritten_after_every_question(tmp_path):
    first = SessionClock(tmp_path, "1 process", clock=Ticks())  # started at 10
    first.tick()  # 20: 10 s, 1 answered
    first.tick()  # 30: 20 s, 2 answered
    assert [(s["wall_seconds"], s["answered"]) for s in read_sessions(tmp_path)] == [(20.0, 2)]
    second = SessionClock(tmp_path, "2 worker processes", clock=Ticks())
    second.tick(3)
    sessions = read_sessions(tmp_path)
    assert [(s["wall_seconds"], s["answered"], s["execution"]) for s in sessions] == \
        [(20.0, 2, "1 process"), (10.0, 3, "2 worker processes")]
    assert json.loads((tmp_path / TIMING).read_text())["format"] == "dynrag-timing/1"


def test_wall_figures_sum_sessions_and_refuse_a_per_question_figure_for_untimed_answers():
    sessions = [{"wall_seconds": 20.0, "answered": 2}, {"wall_seconds": 10.0, "answered": 3}]
    assert wall_figures(sessions, 5) == {"wall_seconds": 30.0, "wall_seconds_per_question": 6.0}
    assert wall_figures(sessions, 7)["wall_seconds_per_question"] is None  # 2 answered before timing existed
    assert wall_figures([], 4) == {"wall_seconds": None, "wall_seconds_per_question": None}


def test_a_session_that_answers_nothing_writes_nothing(tmp_path):
    SessionClock(tmp_path)
    assert not (tmp_path / TIMING).exists() and read_sessions(tmp_path) == []


def test_the_runner_records_its_sessions_and_the_summary_sums_them(tmp_path):
    rows = fx.qa_rows(4)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    answers = {r["question"]: r["answers"][0] for r in rows}
    plan = eval_plan(dataset="jsonl", data=data, method="single", out=tmp_path / "run", corpus="contexts")
    run_eval(plan, method_factory=method_factory(answers), progress=False)
    run = tmp_path / "run"
    sessions = read_sessions(run)
    assert len(sessions) == 1 and sessions[0]["answered"] == 4 and sessions[0]["wall_seconds"] >= 0
    assert sessions[0]["execution"]  # how it answered ("1 process")
    # as if the session had been killed before its last question: that question is answered again
    predictions = run / "predictions.jsonl"
    predictions.write_text("".join(predictions.read_text().splitlines(keepends=True)[:3]))
    summary = run_eval(plan, method_factory=method_factory(answers), progress=False)
    sessions = read_sessions(run)
    assert [s["answered"] for s in sessions] == [4, 1]
    assert summary["wall_seconds"] == sum(s["wall_seconds"] for s in sessions)
    assert summary["wall_seconds_per_question"] == summary["wall_seconds"] / 5  # five answers were timed
    again = run_eval(plan, method_factory=method_factory(answers), progress=False)  # nothing left: no session
    assert len(read_sessions(run)) == 2 and again["wall_seconds"] == summary["wall_seconds"]


def test_a_timing_file_that_cannot_be_written_stops_timing_not_the_run(tmp_path, monkeypatch):
    import dynrag.eval.timing as timing
    from dynrag.errors import FileError

    clock = SessionClock(tmp_path, clock=Ticks())
    clock.tick()
    written = []

    def full_disk(path, data):
        written.append(path)
        raise FileError(f"{path}: No space left on device")

    monkeypatch.setattr(timing, "atomic_write_json", full_disk)
    clock.tick()  # no exception: the answers matter more than their timing
    clock.tick()
    assert len(written) == 1  # it gives up after the first failure
    sessions = read_sessions(tmp_path)
    assert [s["answered"] for s in sessions] == [1]  # the last entry that was written
    assert wall_figures(sessions, 3)["wall_seconds_per_question"] is None  # 2 answers untimed
