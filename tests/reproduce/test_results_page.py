"""`dynrag results`: the page rendered from a fixture results directory and a fixture ledger (the
matrix with the best EM in bold, headline verdicts, the ledger, links, the marks of imported and
foreign records), git's ancestor test, and `--check` against a hand-edited page."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dynrag.reproduce.ledger import Ledger, LedgerClaim
from dynrag.reproduce.provenance import is_ancestor
from dynrag.reproduce.records import ResultRecord, load_records
from dynrag.reproduce.results_page import PageInputs, page_inputs, render_page
from tests.reproduce.test_records import put, record_data

FOREIGN = "f" * 40


def row(ds: str, key: str, label: str, em: float, n: int = 100) -> dict:
    return {"dataset": ds, "key": key, "label": label, "n": n, "cells": {"em": em, "f1": em + 0.05, "retrievals": 1.5}}


def fixture_records(directory: Path) -> Path:
    qwen = record_data(id="t2-qwen", rows=[row("hotpotqa", "dragin", "DRAGIN", 0.22), row("hotpotqa", "flare", "FLARE", 0.18),
                                           row("2wikimultihopqa", "dragin", "DRAGIN", 0.10, 69),
                                           row("2wikimultihopqa", "flare", "FLARE", 0.17, 69)],
                       datasets=["hotpotqa", "2wikimultihopqa"])
    smol = record_data(id="t2-smol", reader="bundled:smollm2", rows=[row("hotpotqa", "dragin", "DRAGIN", 0.10, 20)],
                       claims=[], provenance={"commit": FOREIGN, "date": "2026-12-01",
                                              "imported_from": {"file": "benchmarks/LOG.md", "section": "Six methods"}})
    systems = record_data(id="speed", kind="systems", table="bench_dragin_backends", title="DRAGIN on llama.cpp",
                          reader=None, rows=[], claims=[], published_group=None, published={},
                          figures=[{"name": "DRAGIN per question, llama.cpp graph vs hybrid", "value": 1.8, "unit": "x"}])
    for data in (qwen, smol, systems):
        put(directory, data)
    return directory


LEDGER = Ledger(version=1, claims=[
    LedgerClaim(id="dragin.table2.dragin-above-flare", paper="dragin", source="Table 2", text="DRAGIN above FLARE",
                table="dragin-table2"),
    LedgerClaim(id="deeprag.table1.retrieval-above-cot", paper="deeprag", source="Table 1", text="CoT-Retrieve above CoT"),
])


def page(records: list[ResultRecord]) -> str:
    return render_page(PageInputs(records, LEDGER, link=lambda i: f"../results/{i}.json",
                                  in_history=lambda commit: None if commit is None else commit != FOREIGN))


def test_the_page_answers_the_first_questions_on_its_first_screen(tmp_path):
    text = page(load_records(fixture_records(tmp_path / "results")))
    first = text.splitlines()[:40]
    assert "### Reader `bundled:qwen2.5-0.5b`" in first and "### Reader `bundled:smollm2`" in first
    assert ("| method | table | 2wikimultihopqa: EM / F1 / r/q (n) | hotpotqa: EM / F1 / r/q (n) |" in first)
    assert ("| DRAGIN | dragin-table2 | [0.100 / 0.150 / 1.50 (69)](../results/t2-qwen.json) | "
            "[**0.220** / 0.270 / 1.50 (100)](../results/t2-qwen.json) |") in first
    assert "| FLARE | dragin-table2 | [**0.170** / 0.220 / 1.50 (69)](../results/t2-qwen.json) |" in "\n".join(first)
    # the imported record of a commit not in history: both marks on its cell, spelt out in the legend
    assert "| DRAGIN | dragin-table2 | [**0.100** / 0.150 / 1.50 (20)](../results/t2-smol.json) ↩⚠ |" in first
    assert "↩ imported from the log; ⚠ commit not in history." in first
    assert ("- DRAGIN beats FLARE: hotpotqa, reader `bundled:qwen2.5-0.5b`, \"DRAGIN − FLARE on EM\": paired "
            "permutation, n 100, p 0.508: **undetermined** (2026-12-04, [record](../results/t2-qwen.json))") in first
    assert "- DRAGIN beats closed book: not yet tested." in first


def test_the_ledger_setup_systems_and_records(tmp_path):
    text = page(load_records(fixture_records(tmp_path / "results")))
    assert text.index("## Setup") < text.index("## The claims ledger") < text.index("## Systems figures")
    assert "2 claims, 1 tested on our data" in text
    assert text.index("### DRAGIN (Su et al., 2024)") < text.index("### DeepRAG (Guan et al., 2025)")  # the papers' order
    assert "- `deeprag.table1.retrieval-above-cot` CoT-Retrieve above CoT: not yet tested." in text
    assert "- `dragin.table2.dragin-above-flare` DRAGIN above FLARE: hotpotqa, reader `bundled:qwen2.5-0.5b`" in text
    assert "> **Readers:** `bundled:qwen2.5-0.5b`, `bundled:smollm2`  " in text
    assert "| DRAGIN per question, llama.cpp graph vs hybrid | 1.8 | x |  |" in text
    assert ("- [t2-smol](../results/t2-smol.json) (imported from the log; ⚠ commit not in history): DRAGIN Table 2. "
            "`dynrag reproduce dragin-table2`; from benchmarks/LOG.md, \"Six methods\"") not in text  # no command given
    assert ("- [t2-smol](../results/t2-smol.json) (imported from the log; ⚠ commit not in history): DRAGIN Table 2. "
            "command not recorded; from benchmarks/LOG.md, \"Six methods\"; 2026-12-01, commit ffffffffff.") in text
    assert "(../results/speed.json)" in text
    # every table's rows again, per reader, after the first screen
    assert text.index("## Every table, per reader") > text.index("## Systems figures")
    assert text == page(list(reversed(load_records(tmp_path / "results"))))  # deterministic, whatever the order


def test_a_later_record_replaces_an_earlier_ones_cell(tmp_path):
    records = load_records(fixture_records(tmp_path / "results"))
    later = ResultRecord.model_validate(record_data(id="t2-qwen-later", rows=[row("hotpotqa", "dragin", "DRAGIN", 0.3)],
                                                    provenance={"date": "2026-12-05"}))
    text = page([*records, later])
    assert "| DRAGIN | dragin-table2 | [0.100 / 0.150 / 1.50 (69)](../results/t2-qwen.json) | " \
           "[**0.300** / 0.350 / 1.50 (100)](../results/t2-qwen-later.json) |" in text


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_tells_a_commit_in_history_from_a_foreign_one(tmp_path):
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    (tmp_path / "a").write_text("a")
    git("add", "a")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a")
    head = git("rev-parse", "HEAD").strip()
    assert is_ancestor(head, tmp_path) is True and is_ancestor(head[:8], tmp_path) is True
    assert is_ancestor(FOREIGN, tmp_path) is False
    records_dir = fixture_records(tmp_path / "results")
    inputs = page_inputs(records_dir, tmp_path / "docs" / "results.md", LEDGER, load_records(records_dir))
    assert inputs.link("x") == "../results/x.json" and inputs.in_history(None) is None
    assert "⚠ commit not in history" in render_page(inputs)


def test_results_check_fails_on_a_hand_edited_page(tmp_path):
    from tests.cli_inprocess import run_in_process

    records, out = fixture_records(tmp_path / "results"), tmp_path / "docs" / "results.md"
    written = run_in_process("results", "--records", records, "--out", out)
    assert written.returncode == 0, written.stderr
    assert "[**0.220** / 0.270 / 1.50 (100)](../results/t2-qwen.json)" in out.read_text()
    assert run_in_process("results", "--records", records, "--out", out, "--check").returncode == 0
    out.write_text(out.read_text().replace("0.220", "0.250"))
    checked = run_in_process("results", "--records", records, "--out", out, "--check")
    assert checked.returncode == 1 and "Traceback" not in checked.stderr
    assert len(checked.stderr.strip().splitlines()) == 1 and "is not what `dynrag results` renders" in checked.stderr
    put(records, {**record_data(id="bad"), "colour": "red"})
    bad = run_in_process("results", "--records", records, "--out", out)
    assert bad.returncode == 1 and f"{records / 'bad.json'}: bad result record: colour" in bad.stderr


def test_the_record_list_names_rows_carried_from_an_earlier_record(tmp_path):
    carried = {**row("hotpotqa", "flare", "FLARE", 0.18), "carried_from": "t2-old (abc1234, 2026-12-05)"}
    put(tmp_path, record_data(id="t2-new", rows=[row("hotpotqa", "dragin", "DRAGIN", 0.22), carried]))
    text = page(load_records(tmp_path))
    (listed,) = [line for line in text.splitlines() if line.startswith("- [t2-new]")]
    assert listed.endswith("2026-12-04, commit not recorded, 1 row carried from t2-old (abc1234, 2026-12-05).")


def test_the_record_list_counts_carried_rows_by_their_source(tmp_path):
    old = "t2-old (abc1234, 2026-12-05)"
    rows = [{**row("hotpotqa", "flare", "FLARE", 0.18), "carried_from": old},
            {**row("hotpotqa", "single", "single", 0.2), "carried_from": old},
            {**row("hotpotqa", "seakr", "SeaKR", 0.17), "carried_from": "2 shards: seakr-1of2, seakr-2of2"}]
    put(tmp_path, record_data(id="t2-new", rows=rows))
    (listed,) = [line for line in page(load_records(tmp_path)).splitlines() if line.startswith("- [t2-new]")]
    assert listed.endswith("1 row carried from 2 shards: seakr-1of2, seakr-2of2; "
                           "2 rows carried from t2-old (abc1234, 2026-12-05).")
