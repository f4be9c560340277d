"""`dynrag eval --workers 2` and `--dask` end to end with the real bundled model: every worker loads
the model itself, and the answers equal those of one process (greedy, one torch thread each)."""

from __future__ import annotations

import json
import logging

import pytest
from typer.testing import CliRunner

from dynrag.cli import app
from tests.eval import fixtures as fx


def run(tmp_path, data, name, *extra):
    out = tmp_path / name
    args = ["eval", "--dataset", "jsonl", "--data", str(data), "--method", "single", "--corpus", "contexts",
            "--model", "bundled:smollm2", "--option", "max_new_tokens=24", "--out", str(out), *extra]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    preds = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    return {p["id"]: p for p in preds}, r.output


@pytest.mark.slow
def test_two_local_workers_and_a_dask_cluster_answer_as_one_process_does(tmp_path):
    distributed = pytest.importorskip("distributed")
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(4))
    alone, _ = run(tmp_path, data, "one", "--workers", "1")
    workers, output = run(tmp_path, data, "two", "--workers", "2")
    assert "2 worker processes" in output
    assert sorted(workers) == sorted(alone) == ["q0", "q1", "q2", "q3"]
    assert {i: p["prediction"] for i, p in workers.items()} == {i: p["prediction"] for i, p in alone.items()}
    assert all(p["retrievals"] == 1 and p["support_found"] == p["support"] for p in workers.values())
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, memory_limit=0, silence_logs=logging.ERROR) as cluster:
        on_dask, output = run(tmp_path, data, "dask", "--dask", cluster.scheduler_address)
    assert f"Dask cluster at {cluster.scheduler_address}" in output
    assert {i: p["prediction"] for i, p in on_dask.items()} == {i: p["prediction"] for i, p in alone.items()}
