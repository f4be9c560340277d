"""The executors behind `dynrag eval`: local worker processes (real spawned processes, one killed
with SIGKILL mid-run), threads, and the choice between them. The method is a fast picklable fake
that searches the real pooled BM25 index in each worker; the bundled model runs in
tests/eval/test_distributed_slow.py. Dask: tests/eval/test_dask_cluster.py."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from dynrag.errors import ConfigError
from dynrag.eval.execution import InProcess, Threads, auto_workers, in_flight, make_executor
from dynrag.eval.worker import WorkerJob
from dynrag.eval.processes import Processes, WorkerError
from dynrag.io.rundir import read_predictions
from dynrag.eval.runner import run_eval
from tests.eval.fixtures import eval_plan
from tests.eval import fixtures as fx
from tests.fakes import FakeMethodFactory
from tests.waiting import HANG_GUARD_S, wait_for


def request(tmp_path, data, **kw):
    base = dict(dataset="jsonl", data=data, method="single", out=tmp_path / "run", corpus="contexts")
    base.update(kw)
    return eval_plan(**base)


def answers_for(rows):
    return {r["question"]: r["answers"][0] for r in rows}


def started(log: Path) -> list[tuple[int, str]]:
    """(pid, question) per question a worker started, in order."""
    if not log.exists():
        return []
    return [(int(pid), q) for pid, q in (line.split("\t", 1) for line in log.read_text().splitlines())]


def killer_of_one_in_flight(log: Path, killed: list, held: str) -> threading.Thread:
    """A started thread that SIGKILLs the worker process that took question ``held`` (which that
    worker holds in flight: FakeMethodFactory's ``hold_first``) and records (pid, question)."""

    def kill():
        row = wait_for(lambda: next((r for r in started(log) if r[1] == held), None), f"a worker to start {held!r}")
        os.kill(row[0], signal.SIGKILL)
        killed.append(row)

    thread = threading.Thread(target=kill)
    thread.start()
    return thread


def ids_once(run_dir, rows):
    ids = [p["id"] for p in read_predictions(run_dir)]
    assert sorted(ids) == sorted(r["id"] for r in rows) and len(ids) == len(set(ids))
    return ids


@pytest.mark.slow  # the killed-worker test below makes the same checks on a run that also loses a worker
def test_two_worker_processes_answer_every_question_once(tmp_path):
    rows = fx.qa_rows(8)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    log = tmp_path / "started.log"
    # each question waits until both workers have started one: a late second worker still answers
    factory = FakeMethodFactory(answers_for(rows), log=str(log), meet=2)
    summary = run_eval(request(tmp_path, data, workers=2), method_factory=factory, progress=False)
    ids_once(tmp_path / "run", rows)
    assert summary["n"] == 8 and summary["em"] == 1.0  # answers came back intact from the workers
    pids = {pid for pid, _ in started(log)}
    assert len(pids) == 2 and os.getpid() not in pids  # two other processes did the answering
    preds = read_predictions(tmp_path / "run")
    assert all(p["retrieved_ids"] for p in preds)  # each worker opened the pooled index itself
    assert summary["support_recall"] == 1.0


@pytest.mark.slow  # over a second of CPU: `make test` runs it, `make test-fast` does not
def test_a_worker_killed_mid_question_is_replaced_and_its_question_asked_again(tmp_path):
    rows = fx.qa_rows(10)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    log = tmp_path / "started.log"
    factory = FakeMethodFactory(answers_for(rows), sleep=0.05, log=str(log), hold_first=rows[3]["question"])
    killed: list[tuple[int, str]] = []
    killer = killer_of_one_in_flight(log, killed, rows[3]["question"])
    summary = run_eval(request(tmp_path, data, workers=2), method_factory=factory, progress=False)
    killer.join()
    assert killed, "no worker was killed"
    ids_once(tmp_path / "run", rows)
    assert summary["n"] == 10 and summary["em"] == 1.0
    pid, question = killed[0]
    askers = [p for p, q in started(log) if q == question]
    assert askers[0] == pid and len(askers) == 2 and askers[1] != pid  # asked again, by another worker
    # Asked again by a live worker: the other first one or the replacement, whichever is ready
    # first (a race the test does not judge; the test below shows replacements by construction).
    assert os.getpid() not in {p for p, _ in started(log)}
    assert all(p["retrieved_ids"] for p in read_predictions(tmp_path / "run"))  # each opened the pooled index
    assert summary["support_recall"] == 1.0


@pytest.mark.slow
def test_a_question_that_kills_every_worker_stops_the_run_naming_it(tmp_path):
    rows = fx.qa_rows(6)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    factory = FakeMethodFactory(answers_for(rows), die_on=rows[3]["question"])
    with pytest.raises(WorkerError, match="question 'q3' killed 3 worker processes"):
        run_eval(request(tmp_path, data, workers=2), method_factory=factory, progress=False)
    saved = [p["id"] for p in read_predictions(tmp_path / "run")]
    assert "q3" not in saved and len(saved) == len(set(saved)) and saved  # finished answers are kept
    # the cause removed, the same command finishes the run without redoing what was saved
    log = tmp_path / "started.log"
    run_eval(request(tmp_path, data, workers=2), method_factory=FakeMethodFactory(answers_for(rows), log=str(log)),
             progress=False)
    ids_once(tmp_path / "run", rows)
    assert sorted(q for _, q in started(log)) == sorted(r["question"] for r in rows if r["id"] not in saved)


@pytest.mark.slow  # over a second of CPU: `make test` runs it, `make test-fast` does not
def test_an_exception_in_a_worker_is_raised_by_the_coordinator(tmp_path):
    rows = fx.qa_rows(4)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    factory = FakeMethodFactory(answers_for(rows), fail_on=rows[1]["question"])
    with pytest.raises(ValueError, match="cannot answer"):
        run_eval(request(tmp_path, data, workers=2), method_factory=factory, progress=False)
    saved = [p["id"] for p in read_predictions(tmp_path / "run")]
    assert "q1" not in saved and len(saved) == len(set(saved))


@pytest.mark.slow
def test_workers_resume_a_run_started_in_one_process(tmp_path):
    rows = fx.qa_rows(6)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    with pytest.raises(ValueError):  # in-process, stopped by the method at the fourth question
        run_eval(request(tmp_path, data), method_factory=FakeMethodFactory(fail_on=rows[3]["question"]), progress=False)
    assert [p["id"] for p in read_predictions(tmp_path / "run")] == ["q0", "q1", "q2"]
    log = tmp_path / "started.log"
    run_eval(request(tmp_path, data, workers=2), method_factory=FakeMethodFactory(log=str(log)), progress=False)
    ids_once(tmp_path / "run", rows)
    assert sorted(q for _, q in started(log)) == [r["question"] for r in rows[3:]]  # only what was left


def test_worker_build_failure_is_reported_once(tmp_path):
    rows = fx.qa_rows(3)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    with pytest.raises(ConfigError, match="unknown retriever option|unknown option"):
        job = WorkerJob({"retriever": "bm25", "retriever_options": {"nope": 1}, "model": "bundled"},
                        None, str(tmp_path), FakeMethodFactory())
        list(Processes(job, 2).answers([("a", "q")]))


def test_threads_keep_n_questions_in_flight_with_one_method(tmp_path):
    calls = []
    lock = threading.Lock()
    state = {"active": 0, "most": 0}
    all_three = threading.Barrier(3, timeout=HANG_GUARD_S)  # each round of three meets here: 3 at once by construction

    class Slow:
        name = "slow"

        def answer(self, question):
            with lock:
                state["active"] += 1
                state["most"] = max(state["most"], state["active"])
            all_three.wait()
            with lock:
                state["active"] -= 1
            calls.append(question)
            return FakeMethodFactory()({}, None).answer(question)

    job = WorkerJob({"retriever": None, "model": "openai:x"}, None, str(tmp_path), lambda config, r: Slow())
    outcomes = list(Threads(job, 3).answers([(f"q{i}", f"question {i}") for i in range(9)]))
    assert sorted(o.id for o in outcomes) == [f"q{i}" for i in range(9)]
    assert state["most"] == 3 and len(calls) == 9


def test_choosing_the_executor(tmp_path):
    job = WorkerJob({"retriever": None, "model": "bundled:smollm2"}, None, str(tmp_path), FakeMethodFactory())
    assert isinstance(make_executor(job, workers=1), InProcess)
    two = make_executor(job, workers=2, todo=10)
    assert isinstance(two, Processes) and two.n == 2 and two.job.torch_threads >= 1
    assert isinstance(make_executor(job, workers=4, todo=1), InProcess)  # never more workers than questions
    assert auto_workers("bundled:smollm2", 100) == min(len(os.sched_getaffinity(0)), 100)
    assert auto_workers("bundled:smollm2", 1) == 1
    assert auto_workers("openai:http://127.0.0.1:8080/v1#m", 100) == 1  # a server: threads, not processes
    closure = WorkerJob(job.config, None, str(tmp_path), lambda config, retriever: None)
    assert isinstance(make_executor(closure, workers="auto", todo=10), InProcess)  # cannot travel: stays here
    with pytest.raises(ConfigError, match="cannot be sent to worker processes"):
        make_executor(closure, workers=2, todo=10)
    with pytest.raises(ConfigError, match="--workers must be"):
        make_executor(job, workers=0)
    with pytest.raises(ConfigError, match="--dask and --workers"):
        make_executor(job, workers=2, dask="tcp://127.0.0.1:1")


def test_in_flight_yields_every_item_once_with_at_most_n_running():
    running, peak, lock = [0], [0], threading.Lock()

    def work(i):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.01 * (i % 3))
        with lock:
            running[0] -= 1
        return i * 10

    got = list(in_flight(work, list(range(11)), 3))
    assert sorted(got) == [i * 10 for i in range(11)]
    assert peak[0] <= 3
    assert list(in_flight(work, [1, 2, 3], 1)) == [10, 20, 30]  # one at a time: in order
