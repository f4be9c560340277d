"""A row run as shards (`reproduce --shard I/K`) is joined back by `reproduce --no-run`: the same
cells and claims as the row run whole, each shard read from its run directory or, when that is gone,
from its record."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dynrag.errors import ConfigError
from dynrag.reproduce.records import load_record, load_records
from dynrag.reproduce.runs import reproduce
from tests.cli_inprocess import run_in_process
from tests.reproduce.test_carried_rows import ROWS, by_method, claims_of
from tests.reproduce.test_runs import request


def read_back(req, results: Path, *extra: str):
    return run_in_process("reproduce", "dragin-table2", "--no-run", "--limit", "2", "--dataset", "hotpotqa",
                          "--data", f"hotpotqa={req.data['hotpotqa']}", "--out", req.out, "--results", results,
                          *extra, env={"COLUMNS": "300"})


def cells_but_time(record):
    return {r.key: {k: v for k, v in r.cells.items() if k != "seconds_per_question"} for r in record.rows}


def run_shards(req, *indexes: int, count: int = 2):
    for i in indexes:
        reproduce(req.model_copy(update={"shard": f"{i}/{count}"}), method_factory=by_method, progress=False)


def test_shards_join_into_the_row_run_whole(tmp_path):
    (tmp_path / "whole").mkdir()
    (tmp_path / "sharded").mkdir()
    whole = request(tmp_path / "whole", "dragin-table2", datasets=["hotpotqa"], rows=ROWS)
    reproduce(whole, method_factory=by_method, progress=False)
    assert read_back(whole, tmp_path / "whole-results").returncode == 0
    (expected,) = load_records(tmp_path / "whole-results")

    sharded = request(tmp_path / "sharded", "dragin-table2", datasets=["hotpotqa"], rows=ROWS)
    run_shards(sharded, 1, 2)
    directories = sorted(p.name for p in next(Path(sharded.out).glob("*/hotpotqa")).iterdir())
    assert [d.rsplit("-", 1)[1] for d in directories] == ["shard1of2", "shard2of2"] * 3
    shown = read_back(sharded, tmp_path / "results")
    assert shown.returncode == 0, shown.stderr
    assert "hotpotqa FLARE: joined from 2 shards: flare-" in shown.stderr
    assert "Rows joined from their shards" in shown.stdout
    (joined,) = load_records(tmp_path / "results")
    assert joined.id == expected.id  # the whole table's record, not a shard's
    assert cells_but_time(joined) == cells_but_time(expected)
    assert {r.key: r.scores for r in joined.rows} == {r.key: r.scores for r in expected.rows}
    assert claims_of(joined) == claims_of(expected) and claims_of(joined)
    assert all(r.carried_from.startswith("2 shards: ") for r in joined.rows)


def test_a_shard_whose_run_directory_is_gone_is_read_from_its_record(tmp_path):
    req = request(tmp_path, "dragin-table2", datasets=["hotpotqa"], rows=ROWS)
    run_shards(req, 1, 2)
    results = tmp_path / "results"
    first = read_back(req, results, "--shard", "1/2")  # the first shard's own record
    assert first.returncode == 0, first.stderr
    assert "first 2 questions (shard 1/2), scorer" in first.stdout
    (shard_record,) = load_records(results)
    assert shard_record.id.endswith(".shard1of2") and {r.n for r in shard_record.rows} == {1}
    for directory in Path(req.out).glob("*/hotpotqa/*-shard1of2"):
        shutil.rmtree(directory)  # the machine that ran shard 1 is gone; shard 2 ran here
    shown = read_back(req, results)
    assert shown.returncode == 0, shown.stderr
    assert f"joined from 2 shards: {shard_record.id}.json, dragin-" in shown.stderr
    whole = load_record(results / f"{shard_record.id.removesuffix('.shard1of2')}.json")
    rows = {r.key: r for r in whole.rows}
    assert rows["dragin"].cells["em"] == 1.0 and rows["flare"].cells["em"] == 0.0 and rows["single"].cells["em"] == 0.5
    assert {r.n for r in whole.rows} == {2}
    assert shard_record.shard == "1/2" and whole.shard is None and shard_record.title.endswith(", shard 1/2")

    # the page lists the shard's record but shows its figures only as part of the joined row
    from dynrag.reproduce.ledger import load_ledger
    from dynrag.reproduce.results_page import page_inputs, render_page

    page = render_page(page_inputs(results, tmp_path / "results.md", load_ledger(), load_records(results)))
    figures, records = page.split("## Records")
    assert f"{shard_record.id}.json" not in figures and f"{whole.id}.json" in figures
    assert f"({shard_record.id}.json): " in records or f"{shard_record.id}.json)" in records


def test_a_row_missing_a_shard_is_not_joined_and_says_which(tmp_path):
    req = request(tmp_path, "dragin-table2", datasets=["hotpotqa"], rows=ROWS)
    run_shards(req, 2, count=3)
    shown = read_back(req, tmp_path / "results")
    assert shown.returncode == 0, shown.stderr
    assert "hotpotqa DRAGIN: shard 2 of 3 found; 1, 3 not yet run" in shown.stderr
    assert "no row has a result yet; no record written" in shown.stderr


def test_a_shard_that_did_not_finish_is_not_joined(tmp_path):
    req = request(tmp_path, "dragin-table2", datasets=["hotpotqa"], rows=["single"])
    run_shards(req, 1, 2)
    (directory,) = Path(req.out).glob("*/hotpotqa/single-*-shard2of2")
    (directory / "predictions.jsonl").write_text("")  # as if killed before its only question ended
    shown = read_back(req, tmp_path / "results")
    assert shown.returncode == 0, shown.stderr
    assert "not joined: shard 2/2 (" in shown.stderr and "answers 0 of its 1 questions (1 missing)" in shown.stderr


def test_tables_that_carry_no_rows_refuse_shards(tmp_path):
    req = request(tmp_path, "world", shard="1/2")
    with pytest.raises(ConfigError, match="--shard 1/2: table 'world' reads more of each question"):
        reproduce(req, method_factory=by_method, progress=False)
