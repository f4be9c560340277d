"""`dynrag eval` and `dynrag compare` through the real CLI (the model replaced by a fake method)."""

import json

import pytest
from typer.testing import CliRunner

from dynrag.cli import app
from dynrag.eval import runner
from tests.eval import fixtures as fx
from tests.fakes import method_factory

cli = CliRunner()


@pytest.fixture
def fake_model(monkeypatch):
    rows = fx.qa_rows(4)
    answers = {r["question"]: (r["answers"][0] if i < 3 else "nowhere") for i, r in enumerate(rows)}
    monkeypatch.setattr(runner, "default_method_factory", method_factory(answers))
    return rows


def test_eval_then_compare_with_plot(tmp_path, fake_model):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fake_model)
    common = ["--dataset", "jsonl", "--data", str(data), "--corpus", "contexts"]
    r = cli.invoke(app, ["eval", *common, "--method", "direct", "--out", str(tmp_path / "direct")])
    assert r.exit_code == 0, r.output
    assert "# direct on jsonl" in r.stdout and "| EM (%) | 75.0 |" in r.stdout
    r = cli.invoke(app, ["eval", *common, "--method", "single", "--option", "k=2", "--limit", "3",
                         "--out", str(tmp_path / "single"), "--baseline", str(tmp_path / "direct")])
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "single" / "summary.json").read_text())
    assert summary["n"] == 3 and summary["em"] == 1.0 and summary["knowledge_boundary"]["n"] == 3
    assert json.loads((tmp_path / "single" / "config.json").read_text())["options"]["k"] == 2

    png = tmp_path / "plots" / "f1.png"
    r = cli.invoke(app, ["compare", str(tmp_path / "direct"), str(tmp_path / "single"), "--plot", str(png)])
    assert r.exit_code == 0, r.output
    table = r.stdout.splitlines()
    assert table[0].startswith("| run | method |") and len([l for l in table if l.startswith("| ")]) == 4
    assert any(l.startswith("| direct | direct | jsonl |") and "| 75.0 |" in l for l in table)
    assert any(l.startswith("| single | single |") and "| 1.00 |" in l for l in table)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_eval_errors_are_one_line(tmp_path, fake_model):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fake_model)
    r = cli.invoke(app, ["eval", "--dataset", "jsonl", "--data", str(data), "--method", "single", "--out", str(tmp_path / "r")])
    assert r.exit_code == 1 and "pass --corpus contexts" in r.output and "Traceback" not in r.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "q?"}\n')
    r = cli.invoke(app, ["eval", "--dataset", "jsonl", "--data", str(bad), "--method", "direct", "--out", str(tmp_path / "r")])
    assert r.exit_code == 1 and f"{bad}:1: record 0: missing field 'answers'" in r.output.replace("\n", "")
    r = cli.invoke(app, ["eval", "--dataset", "jsonl", "--data", str(bad), "--method", "direct", "--skip-bad",
                         "--out", str(tmp_path / "r")])
    assert r.exit_code == 1 and "no questions to evaluate" in r.output.replace("\n", "")
    r = cli.invoke(app, ["compare", str(tmp_path / "nowhere")])
    assert r.exit_code == 1 and "not a run directory" in r.output.replace("\n", "")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "notes.txt").write_text("hi")
    r = cli.invoke(app, ["compare", str(tmp_path / "folder")])
    assert r.exit_code == 1 and f"{tmp_path / 'folder'}: not a run directory" in r.output.replace("\n", "")


def test_eval_preset_and_retriever_flags_reach_the_config(tmp_path, fake_model):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fake_model)
    common = ["eval", "--dataset", "jsonl", "--data", str(data), "--corpus", "contexts", "--method", "single", "--limit", "2"]
    r = cli.invoke(app, [*common, "--preset", "balanced", "--retriever", "bm25", "--out", str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    config = json.loads((tmp_path / "b" / "config.json").read_text())
    assert config["options"]["preset"] == "balanced" and config["options"]["rerank"] == "embedding"
    assert (config["retriever"], config["retriever_options"]) == ("bm25", {})
    r = cli.invoke(app, [*common, "--retriever", "hybrid", "--retriever-option", "alpha=high", "--out", str(tmp_path / "h")])
    assert r.exit_code == 1 and "--retriever-option alpha of retriever 'hybrid': must be a number (got 'high')" in r.output.replace("\n", "")


def test_compare_adds_boundary_figures_against_a_direct_run_among_the_runs(tmp_path, fake_model):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fake_model)
    common = ["--dataset", "jsonl", "--data", str(data), "--corpus", "contexts"]
    for method in ("direct", "single"):
        r = cli.invoke(app, ["eval", *common, "--method", method, "--out", str(tmp_path / method)])
        assert r.exit_code == 0, r.output
    r = cli.invoke(app, ["compare", str(tmp_path / "single")])
    assert "KB F1" not in r.stdout  # no direct run to compare with
    r = cli.invoke(app, ["compare", str(tmp_path / "direct"), str(tmp_path / "single")])
    assert r.exit_code == 0, r.output
    header, _, direct_row, single_row = [l for l in r.stdout.splitlines() if l.startswith("|")]
    assert header.endswith("| KB F1 | KB Acc | KB BAcc | KB MCC |")
    # the fake single run retrieves on every question; direct was right on 3 of 4:
    # no positive predictions (F1 0), accuracy = the one question direct got wrong
    assert single_row.endswith("| 0.000 | 0.250 | 0.500 | 0.000 |")
    assert direct_row.endswith("| – | – | – | – |")


@pytest.mark.parametrize("method", ["direct", "single"])
def test_a_corpus_that_is_no_index_is_refused_even_where_the_method_does_not_retrieve(tmp_path, fake_model, method):
    from tests.cli_inprocess import run_in_process

    data = fx.write_jsonl(tmp_path / "qa.jsonl", fake_model)
    common = ["eval", "--dataset", "jsonl", "--data", data, "--method", method, "--out", tmp_path / "run"]
    missing = tmp_path / "nonexistent"
    r = run_in_process(*common, "--corpus", missing)
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [
        f"error: --corpus {missing}: no such index directory (or use --corpus contexts)"]
    assert not (tmp_path / "run").exists()
    r = run_in_process(*common, "--corpus", tmp_path)  # a directory, but no index in it
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and "manifest.json missing" in r.stderr
    assert not (tmp_path / "run").exists()


def test_a_tune_folder_as_corpus_points_to_its_best_yaml(tmp_path, fake_model):
    from dynrag.run.checks import TUNE_MARKS
    from dynrag.tune.report import BEST_YAML
    from dynrag.tune.study import STUDY_DB
    from dynrag.tune.tuned import TUNED_JSON
    from tests.cli_inprocess import run_in_process

    assert {STUDY_DB, BEST_YAML, TUNED_JSON} == set(TUNE_MARKS)  # the names `dynrag tune` writes
    tune = tmp_path / "tune"
    (tune / "trials" / "0").mkdir(parents=True)
    (tune / STUDY_DB).write_bytes(b"")
    (tune / BEST_YAML).write_text("method: single\n")
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fake_model)
    for method in ("single", "direct"):
        r = run_in_process("eval", "--dataset", "jsonl", "--data", data, "--method", method, "--corpus", tune,
                           "--out", tmp_path / "run")
        assert r.returncode == 1 and r.stderr.strip().splitlines() == [
            f"error: --corpus {tune}: a `dynrag tune` folder, not an index (run its best configuration with "
            f"`dynrag eval --config {tune / BEST_YAML}`, or pass --corpus contexts or an index directory)"]
        assert "rebuild" not in r.stderr


def test_run_files_get_the_mode_a_plain_open_gives(tmp_path, fake_model):
    import os
    import stat

    data = fx.write_jsonl(tmp_path / "qa.jsonl", fake_model)
    before = os.umask(0o027)  # neither mkstemp's 0600 nor the usual 0644
    try:
        r = cli.invoke(app, ["eval", "--dataset", "jsonl", "--data", str(data), "--corpus", "contexts",
                             "--method", "direct", "--out", str(tmp_path / "run")])
    finally:
        os.umask(before)
    assert r.exit_code == 0, r.output
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "run").iterdir() if p.is_file()}
    assert {"config.json", "config.yaml", "predictions.jsonl", "summary.json"} <= set(modes)
    assert set(modes.values()) == {0o640}, modes
