"""Result records and the claims ledger: strict loading with one-line errors naming the file, atomic
writing, provenance, and the record `reproduce ... --results DIR` writes of a run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dynrag.errors import DataError
from dynrag.reproduce.ledger import load_ledger
from dynrag.io.files import file_sha256
from dynrag.reproduce.provenance import git_commit, is_ancestor, load_text
from dynrag.reproduce.records import ResultRecord, load_record, load_records, write_record

SRC = Path(__file__).resolve().parents[2] / "src" / "dynrag" / "reproduce"


def record_data(**over) -> dict:
    data = {
        "version": 1, "id": "dragin-table2.qwen.hotpotqa", "kind": "table", "table": "dragin-table2",
        "title": "DRAGIN Table 2", "reader": "bundled:qwen2.5-0.5b", "datasets": ["hotpotqa"], "corpus": "contexts",
        "rows": [{"dataset": "hotpotqa", "key": "dragin", "label": "DRAGIN", "n": 100,
                  "cells": {"em": 0.22, "f1": 0.27, "retrievals": 1.44}}],
        "published_group": "Llama2-13b-chat", "published": {"hotpotqa": {"dragin": {"em": 0.232}}},
        "claims": [{"claim": "dragin.table2.dragin-above-flare", "text": "DRAGIN − FLARE on EM", "dataset": "hotpotqa",
                    "test": "paired permutation", "n": 100, "p": 0.508, "difference": 0.04, "verdict": "undetermined"}],
        "figures": [],
        "provenance": {"commit": None, "command": "dynrag reproduce dragin-table2", "date": "2026-12-04"},
    }
    data.update(over)
    return data


def put(directory: Path, data: dict, name: str | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name or data['id']}.json"
    path.write_text(json.dumps(data))
    return path


def test_a_record_loads_and_round_trips_byte_for_byte(tmp_path):
    record = load_record(put(tmp_path / "a", record_data()))
    assert record.rows[0].cells["em"] == 0.22 and record.claims[0].verdict == "undetermined"
    path = write_record(tmp_path / "b", record)
    assert load_record(path) == record
    before = path.read_bytes()
    write_record(tmp_path / "b", load_record(path))
    assert path.read_bytes() == before  # a rewrite of the same figures changes nothing
    assert b'"questions"' not in before and b'"scores"' not in before  # written as before scores were kept


def test_per_question_scores_are_one_line_a_list_and_round_trip(tmp_path):
    row = {"dataset": "hotpotqa", "key": "dragin", "label": "DRAGIN", "n": 3, "cells": {"em": 0.5},
           "scores": {"em": [1.0, 0.0, None], "f1": [1.0, 0.25, None]}}
    record = load_record(put(tmp_path / "a", record_data(rows=[row], questions={"hotpotqa": ["q1", "q2", "q3"]})))
    text = write_record(tmp_path / "b", record).read_text()
    assert '"em": [1, 0, null]' in text and '"f1": [1, 0.25, null]' in text and '"hotpotqa": ["q1", "q2", "q3"]' in text
    assert '"datasets": [\n    "hotpotqa"\n  ]' in text  # the other lists keep their layout
    assert load_record(tmp_path / "b" / f"{record.id}.json") == record


@pytest.mark.parametrize("bad, message", [
    (dict(colour="red"), "colour: Extra inputs are not permitted"),
    (dict(rows=[{"dataset": "h", "key": "k", "label": "l", "cels": {}}]), "rows.0.cels: Extra inputs"),
    (dict(version=2), "version"),
    (dict(rows=[{"dataset": "hotpotqa", "key": "k", "label": "l", "scores": {"em": [1.0]}}]),
     "rows.0.scores.em: 1 values for 0 questions of 'hotpotqa'"),
    (dict(questions={"hotpotqa": ["a", "b"]}, rows=[{"dataset": "hotpotqa", "key": "k", "label": "l",
                                                     "scores": {"f1": [1.0]}}]), "rows.0.scores.f1: 1 values for 2"),
    (dict(claims=[{"text": "t", "dataset": "d", "test": "x", "n": 1, "p": 0.5, "verdict": "maybe"}]), "verdict"),
])
def test_unknown_keys_and_bad_values_are_one_line_errors_naming_the_file(tmp_path, bad, message):
    path = put(tmp_path, record_data(**bad))
    with pytest.raises(DataError) as exc:
        load_records(tmp_path)
    text = str(exc.value)
    assert text.startswith(f"{path}: bad result record: ") and message in text and "\n" not in text


def test_a_record_must_be_named_by_its_id_and_be_json(tmp_path):
    with pytest.raises(DataError, match="is not the file's name 'other'"):
        load_record(put(tmp_path, record_data(), name="other"))
    (tmp_path / "torn.json").write_text("{")
    with pytest.raises(DataError, match=r"torn.json: unreadable result record: not valid JSON"):
        load_record(tmp_path / "torn.json")
    assert load_records(tmp_path / "absent") == []


def test_provenance_helpers(tmp_path):
    (tmp_path / "f").write_bytes(b"abc")
    assert file_sha256(tmp_path / "f") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert load_text(1.04, 2.0) == "1.0-2.0" and load_text(None, None) is None
    assert git_commit(tmp_path) is None and is_ancestor("abc", tmp_path) is None  # not a repository


def test_the_ledger_is_strict_and_reads_as_empty_before_it_exists(tmp_path):
    assert load_ledger(tmp_path / "none.json").claims == []
    claim = {"id": "dragin.table2.dragin-above-flare", "paper": "dragin", "source": "Table 2", "text": "t",
             "table": "dragin-table2"}
    (tmp_path / "l.json").write_text(json.dumps({"version": 1, "note": "", "claims": [claim]}))
    assert load_ledger(tmp_path / "l.json").ids() == {"dragin.table2.dragin-above-flare"}
    (tmp_path / "bad.json").write_text(json.dumps({"version": 1, "claims": [{**claim, "tabel": "x"}]}))
    with pytest.raises(DataError, match=r"bad.json: bad claims ledger: claims.0.tabel"):
        load_ledger(tmp_path / "bad.json")
    (tmp_path / "twice.json").write_text(json.dumps({"version": 1, "claims": [claim, claim]}))
    with pytest.raises(DataError, match="appears twice"):
        load_ledger(tmp_path / "twice.json")


def declared_ledger_ids() -> set[str]:
    """The ledger ids the claim machinery names: literal ones, and the ones Tables 2 and 4 build."""
    text = "\n".join(p.read_text() for p in SRC.glob("*.py"))
    ids = set(re.findall(r'"((?:dragin|deeprag|bestpractice)\.[a-z0-9-]+\.[a-z0-9-]+)"', text))
    ids |= {f"dragin.table2.dragin-above-{k}" for k in ("direct", "single", "fixed-length", "fixed-sentence", "flare")}
    ids |= {f"dragin.table4.rind-timing-above-{k}" for k in ("fixed-length", "fixed-sentence", "flare")}
    return ids


def test_every_ledger_id_the_claims_name_is_in_the_ledger():
    ledger = load_ledger()
    if not ledger.claims:
        pytest.skip("the claims ledger is not written yet")
    assert declared_ledger_ids() - ledger.ids() == set()


# ---- the record of a run -------------------------------------------------------------------------


def test_reproduce_with_results_writes_a_valid_record(tmp_path):
    from dynrag.reproduce.record_build import RunContext, table_record
    from dynrag.reproduce.render import render, render_lines
    from dynrag.reproduce.runs import reproduce
    from dynrag.reproduce.tables import paper_cells, records_of
    from tests.cli_inprocess import run_in_process
    from tests.fakes import method_factory
    from tests.reproduce.test_runs import answers, request

    req = request(tmp_path, "dragin-table2", datasets=["hotpotqa"], rows=["dragin", "flare", "single"])
    report = reproduce(req, method_factory=method_factory(answers()), progress=False)
    lines = render_lines(report)
    assert "\n".join(lines) + "\n" == render(report)  # the printed table is unchanged
    record = table_record(report, lines, RunContext("dynrag reproduce dragin-table2", 1.25, 0.5, 1.0))
    assert record.datasets == ["hotpotqa"] and {r.key for r in record.rows} == {"dragin", "flare", "single"}
    assert record.rows[0].n == 2 and set(record.rows[0].cells) == {"em", "f1", "retrievals", "seconds_per_question"}
    # each row's per-question scores, in the order of the record's question ids
    flare_records = records_of(report["results"][("hotpotqa", "flare")])
    assert record.questions == {"hotpotqa": [str(r["id"]) for r in flare_records]}
    flare_row = next(r for r in record.rows if r.key == "flare")
    assert flare_row.scores["em"] == [r["em"] for r in flare_records] and set(flare_row.scores) == {"em", "f1", "retrievals"}
    assert flare_row.carried_from is None
    assert record.published_group == "Llama2-13b-chat"
    cells = paper_cells("dragin-table2", "Llama2-13b-chat")["hotpotqa"]
    assert record.published == {"hotpotqa": {k: cells[k] for k in ("dragin", "flare", "single")}}
    flare = [c for c in record.claims if "FLARE" in c.text]
    assert len(flare) == 1 and flare[0].test == "McNemar (exact)" and flare[0].n == 2  # EM is right or wrong
    if "dragin.table2.dragin-above-flare" in load_ledger().ids():
        assert flare[0].claim == "dragin.table2.dragin-above-flare"
    p = record.provenance
    assert p.load == "0.5-1.0" and p.wall_s == 1.2 and p.model == record.reader and p.model_sha256
    assert p.data == str(req.data["hotpotqa"]) and len(p.data_sha256) == 64
    assert load_record(write_record(tmp_path / "results", record)) == record

    # the command: the same finished runs read back (--no-run), the record written beside the table
    shown = run_in_process("reproduce", "dragin-table2", "--no-run", "--limit", "2", "--dataset", "hotpotqa",
                           "--data", f"hotpotqa={req.data['hotpotqa']}", "--out", req.out,
                           "--results", tmp_path / "cli-results", env={"COLUMNS": "300"})
    assert shown.returncode == 0, shown.stderr
    assert "| DRAGIN |" in shown.stdout and "Result record:" in shown.stderr
    (written,) = load_records(tmp_path / "cli-results")
    assert {r.key for r in written.rows} == {"dragin", "flare", "single"} and written.claims
    assert written.provenance.command  # sys.argv joined (here the test runner's)
    # --no-run only renders: the wall time is the rows' own (their timing.json), the load unknown
    row_walls = [summary["wall_seconds"] for summary in report["results"].values() if summary]
    assert written.provenance.wall_s == round(sum(row_walls), 1) and written.provenance.load is None


def test_tables_that_answer_in_their_own_loop_refuse_results(tmp_path):
    from tests.cli_inprocess import run_in_process

    result = run_in_process("reproduce", "bestpractice-table1", "--no-run", "--results", tmp_path / "r",
                            "--out", tmp_path / "runs")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "--results: bestpractice-table1 writes no result record yet" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "r").exists()


def test_a_retrieval_table_takes_results_and_writes_nothing_without_a_finished_row(tmp_path):
    from tests.cli_inprocess import run_in_process

    result = run_in_process("reproduce", "bestpractice-table2", "--no-run", "--results", tmp_path / "r",
                            "--out", tmp_path / "runs", "--data-dir", tmp_path / "none")
    assert "Traceback" not in result.stderr and "writes no result record" not in result.stderr
    assert "no record written" in result.stderr and not (tmp_path / "r").exists()


def test_a_retrieval_table_run_writes_a_record_of_its_rows(tmp_path):
    from dynrag.reproduce.claims import Claim
    from dynrag.reproduce.record_build import RunContext, retrieval_record
    from dynrag.reproduce.records import load_record, write_record
    from dynrag.reproduce.retrieval_tables import RetrievalRow
    from tests.reproduce.test_retrieval_tables import run, tiny_table

    table = tiny_table([RetrievalRow("bm25", "BM25", "bm25"), RetrievalRow("bm25b", "BM25 again", "bm25")])
    table.claims = [Claim("the same ranks the same", "bm25", "bm25b", "mrr@10")]
    report = run(tmp_path, table)
    record = retrieval_record(report, RunContext("dynrag reproduce tiny", 1.25, None, None))
    loaded = load_record(write_record(tmp_path / "results", record))
    assert loaded == record and loaded.table == "tiny" and loaded.datasets == ["hotpotqa"]
    assert [(r.dataset, r.key, r.n) for r in loaded.rows] == [("hotpotqa", "bm25", 2), ("hotpotqa", "bm25b", 2)]
    scores = report["results"][("hotpotqa", "bm25")]["table_scores"]
    assert loaded.rows[0].cells == scores and set(scores) == {"r@1", "mrr@10", "words@1"}
    assert loaded.published_group is None and loaded.published == {}  # "tiny" has no typed cells
    (claim,) = loaded.claims
    # both questions' MRR is 0 or 1 here, so the right/wrong test decides it
    assert (claim.dataset, claim.test, claim.n, claim.verdict, claim.difference) == \
        ("hotpotqa", "McNemar (exact)", 2, "undetermined", 0.0)
    assert loaded.provenance.wall_s == 1.2 or loaded.provenance.wall_s == 1.3
    assert loaded.provenance.data_sha256 and loaded.reader is None and loaded.corpus == "contexts"


def test_world_claim_lines_carry_their_decisions_unchanged_in_print():
    from dynrag.reproduce.claims import decided_in
    from dynrag.reproduce.world_claims import claim_lines

    direct = [{"id": f"q{i}", "em": 1.0, "needs_retrieval": False, "retrievals": 0} for i in range(6)]
    single = [{"id": f"q{i}", "em": 0.0, "needs_retrieval": False, "retrievals": 1} for i in range(6)]
    lines = claim_lines({"direct": direct, "single": single})
    (hurts,) = [d for d in decided_in(lines) if d.text.startswith("Needless retrieval hurts")]
    assert (hurts.dataset, hurts.test, hurts.n, hurts.verdict) == ("world", "McNemar (exact)", 6, "holds")
    assert hurts.ledger == "deeprag.section1.needless-retrieval-hurts" and hurts.difference == 1.0
    printed = next(line for line in lines if line.startswith("- Needless retrieval hurts"))
    assert printed == ("- Needless retrieval hurts: closed book beats single retrieval on questions the model knows: "
                       f"EM 1.000 vs 0.000; McNemar (exact), n 6, p {hurts.p:.3f}: **holds**.")


def test_row_scores_follow_the_union_of_the_rows_questions():
    from dynrag.reproduce.record_build import row_scores
    from dynrag.reproduce.tables import RunSpec, Table

    runs = [RunSpec("hotpotqa", "a", "A", "single", {}), RunSpec("hotpotqa", "b", "B", "flare", {}),
            RunSpec("hotpotqa", "c", "C", "dragin", {})]
    table = Table("t", "T", ["hotpotqa"], runs, lambda ds: [], {}, "")
    results = {
        ("hotpotqa", "a"): {"question_records": [{"id": "q1", "em": 1.0, "f1": 1.0, "retrievals": 1},
                                                 {"id": "q2", "em": 0.0, "f1": 0.123456, "retrievals": 2}]},
        ("hotpotqa", "b"): {"question_records": [{"id": "q3", "em": 1.0, "f1": 1.0, "retrievals": 0},
                                                 {"id": "q2", "em": 1.0, "f1": 1.0}]},
        ("hotpotqa", "c"): None,  # not run: no scores, no questions of its own
    }
    questions, scores = row_scores(table, results)
    assert questions == {"hotpotqa": ["q1", "q2", "q3"]}
    assert scores[("hotpotqa", "a")] == {"em": [1.0, 0.0, None], "f1": [1.0, 0.1235, None], "retrievals": [1.0, 2.0, None]}
    # b answered q2 without a retrieval count: that one value is missing, not the question
    assert scores[("hotpotqa", "b")] == {"em": [None, 1.0, 1.0], "f1": [None, 1.0, 1.0], "retrievals": [None, None, 0.0]}
    assert ("hotpotqa", "c") not in scores
