"""A row whose run directory is gone is read from the earlier record of the same setting: its cells
as recorded, its claims tested again on its per-question scores beside the rows still on disk."""

from __future__ import annotations

import shutil
from pathlib import Path

from dynrag.reproduce.records import load_records, write_record
from tests.cli_inprocess import run_in_process
from tests.fakes import FakeMethod
from tests.reproduce import test_runs as fx_runs
from tests.reproduce.test_runs import request

ROWS = ["dragin", "flare", "single"]


def by_method(config, retriever):
    """DRAGIN answers both questions right, single retrieval the first, FLARE neither."""
    right = fx_runs.answers()
    wrong = {q: "nothing" for q in right}
    chosen = {"dragin": {**right, fx_runs.fx.HOTPOT[1]["question"]: fx_runs.fx.HOTPOT[1]["answer"]},
              "single": right, "flare": wrong}
    return FakeMethod(retriever, chosen.get(config["method"], wrong), 0.0)


def read_back(req, results: Path):
    return run_in_process("reproduce", "dragin-table2", "--no-run", "--limit", "2", "--dataset", "hotpotqa",
                          "--data", f"hotpotqa={req.data['hotpotqa']}", "--out", req.out, "--results", results,
                          env={"COLUMNS": "300"})


def recorded(tmp_path: Path):
    """(request, results directory, record) after the three rows ran and were read back once."""
    from dynrag.reproduce.runs import reproduce

    req = request(tmp_path, "dragin-table2", datasets=["hotpotqa"], rows=ROWS)
    reproduce(req, method_factory=by_method, progress=False)
    results = tmp_path / "results"
    assert read_back(req, results).returncode == 0
    (record,) = load_records(results)
    return req, results, record


def claims_of(record):
    return [(c.text, c.n, c.p, c.difference, c.verdict) for c in record.claims]


def test_rows_without_a_run_directory_are_carried_from_the_record(tmp_path):
    from dynrag.reproduce.runs import reproduce

    req = request(tmp_path, "dragin-table2", datasets=["hotpotqa"], rows=ROWS)
    report = reproduce(req, method_factory=by_method, progress=False)
    results = tmp_path / "results"
    first = read_back(req, results)
    assert first.returncode == 0, first.stderr
    (record,) = load_records(results)
    rows = {r.key: r for r in record.rows}
    assert rows["dragin"].scores["em"] == [1.0, 1.0] and rows["flare"].scores["em"] == [0.0, 0.0]
    assert not any(r.carried_from for r in record.rows) and "carried" not in first.stderr

    # FLARE's run directory is gone: its row comes from the record, the others from their runs
    shutil.rmtree(report["results"][("hotpotqa", "flare")]["run_dir"])
    second = read_back(req, results)
    assert second.returncode == 0, second.stderr
    assert "hotpotqa FLARE: no run directory here; carried from " + record.id in second.stderr
    assert "Rows carried from an earlier record" in second.stdout
    (again,) = load_records(results)
    carried = {r.key: r for r in again.rows}
    assert carried["flare"].carried_from.startswith(record.id) and carried["dragin"].carried_from is None
    assert carried["flare"].cells == rows["flare"].cells and carried["flare"].scores == rows["flare"].scores
    assert claims_of(again) == claims_of(record) and any("FLARE" in c[0] for c in claims_of(again))
    remark = next(line for line in second.stdout.splitlines() if line.startswith("Rows carried"))
    assert second.stdout.replace(remark + "\n", "").replace("\n\n\n", "\n\n") == first.stdout  # the same table

    # every run directory gone: the record read back from itself keeps its figures and claims
    shutil.rmtree(req.out)
    third = read_back(req, results)
    assert third.returncode == 0, third.stderr
    (last,) = load_records(results)
    assert all(r.carried_from for r in last.rows) and claims_of(last) == claims_of(record)
    assert {r.key: r.cells for r in last.rows} == {r.key: r.cells for r in record.rows}
    assert carried["flare"].carried_from == {r.key: r for r in last.rows}["flare"].carried_from  # named once


def test_a_record_without_scores_carries_nothing(tmp_path):
    req, results, record = recorded(tmp_path)
    old = record.model_copy(update={"questions": {}, "rows": [r.model_copy(update={"scores": {}}) for r in record.rows]})
    write_record(results, old)  # as records were written before scores were kept
    shutil.rmtree(req.out)
    shown = read_back(req, results)
    assert shown.returncode == 0 and "carried" not in shown.stderr
    assert "no row has a result yet; no record written" in shown.stderr
    (kept,) = load_records(results)
    assert kept == old  # nothing already written is lost


def test_a_record_of_other_data_carries_nothing(tmp_path):
    req, results, record = recorded(tmp_path)
    shutil.rmtree(req.out)
    data = Path(req.data["hotpotqa"])
    data.write_text(data.read_text().replace("Paris", "Lyon"))  # the same file name, other questions
    shown = read_back(req, results)
    assert shown.returncode == 0 and "its data files' sha256 differ from this command's" in shown.stderr
    assert load_records(results) == [record]  # nothing carried, nothing rewritten


def test_tables_whose_lines_read_more_than_a_record_keeps_carry_nothing(tmp_path):
    from dynrag.reproduce.carried_rows import carry_rows
    from dynrag.reproduce.catalog import open_table

    carrying = {name: open_table(name, {}).carries_rows
                for name in ("world", "world-figure8", "deeprag-figure7", "deeprag-figure8", "dragin-table2",
                             "dynamic-family", "deeprag-table1")}
    assert carrying == {"world": False, "world-figure8": False, "deeprag-figure7": False, "deeprag-figure8": False,
                        "dragin-table2": True, "dynamic-family": True, "deeprag-table1": True}
    # before any record is looked for: a world table's missing row stays missing
    report = {"table": open_table("world", {}), "results": {("world", "single"): None}}
    assert carry_rows(report, tmp_path) == [] and report["results"] == {("world", "single"): None}
