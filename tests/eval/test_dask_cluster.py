"""`dynrag eval --dask ADDRESS` against a real Dask LocalCluster on 127.0.0.1 (two single-threaded
worker processes behind nannies), with a fast picklable fake method searching the real pooled BM25
index on the workers; one worker is killed with SIGKILL mid-run. The bundled model on Dask runs in
tests/eval/test_distributed_slow.py."""

from __future__ import annotations

import logging
import os

import pytest

from dynrag.errors import DynragError
from dynrag.eval.dask_cluster import DaskCluster
from dynrag.eval.worker import WorkerJob
from dynrag.eval.runner import run_eval
from tests.eval.fixtures import eval_plan
from tests.eval import fixtures as fx
from tests.eval.test_execution import answers_for, ids_once, killer_of_one_in_flight, started
from tests.fakes import FakeMethodFactory

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
        memory_limit=0, silence_logs=logging.ERROR,
    ) as local:
        yield local


def request(tmp_path, data, address, **kw):
    return eval_plan(dataset="jsonl", data=data, method="single", out=tmp_path / "run", corpus="contexts",
                       dask=address, **kw)


def test_the_cluster_listens_on_loopback_only(cluster):
    assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
    with distributed.Client(cluster.scheduler_address, set_as_default=False) as client:
        workers = client.scheduler_info()["workers"]
    assert len(workers) == 2 and all(address.startswith("tcp://127.0.0.1:") for address in workers)


def test_questions_run_on_the_workers_and_the_coordinator_writes_each_once(cluster, tmp_path):
    rows = fx.qa_rows(8)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    log = tmp_path / "started.log"
    summary = run_eval(request(tmp_path, data, cluster.scheduler_address),
                       method_factory=FakeMethodFactory(answers_for(rows), sleep=0.05, log=str(log)), progress=False)
    ids_once(tmp_path / "run", rows)
    assert summary["n"] == 8 and summary["em"] == 1.0 and summary["support_recall"] == 1.0
    with distributed.Client(cluster.scheduler_address, set_as_default=False) as client:
        worker_pids = set(client.run(os.getpid).values())
    assert {pid for pid, _ in started(log)} <= worker_pids and os.getpid() not in worker_pids
    # resume: a finished run sends nothing to the cluster
    again = run_eval(request(tmp_path, data, cluster.scheduler_address),
                     method_factory=FakeMethodFactory(log=str(log)), progress=False)
    assert again == summary and len(started(log)) == 8


@pytest.mark.slow  # over a second of CPU: `make test` runs it, `make test-fast` does not
def test_a_worker_killed_mid_run_loses_no_question_and_duplicates_none(cluster, tmp_path):
    rows = fx.qa_rows(10)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    log = tmp_path / "started.log"
    killed: list = []
    killer = killer_of_one_in_flight(log, killed, rows[3]["question"])
    summary = run_eval(request(tmp_path, data, cluster.scheduler_address),
                       method_factory=FakeMethodFactory(answers_for(rows), sleep=0.05, log=str(log),
                                                        hold_first=rows[3]["question"]), progress=False)
    killer.join()
    assert killed, "no worker was killed"
    ids_once(tmp_path / "run", rows)
    assert summary["n"] == 10 and summary["em"] == 1.0
    pid, question = killed[0]
    assert [p for p, q in started(log) if q == question][0] == pid
    assert len([p for p, q in started(log) if q == question]) >= 2  # the scheduler ran it again


def test_an_unreachable_scheduler_is_one_clear_line(tmp_path):
    job = WorkerJob({"retriever": None, "model": "bundled"}, None, str(tmp_path), FakeMethodFactory())
    with pytest.raises(DynragError, match=r"--dask tcp://127.0.0.1:9: cannot reach the Dask scheduler"):
        list(DaskCluster(job, "tcp://127.0.0.1:9", connect_timeout=1).answers([("q", "question")]))
