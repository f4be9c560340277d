"""Run directories: validated before anything is written, and of one kind.

Through the real CLI and real files; the model is replaced by a fake method, which records
whether it was ever built.
"""

import json

import pytest
from typer.testing import CliRunner

from dynrag.cli import app
from dynrag.eval import runner
from dynrag.eval.runner import eval_config
from dynrag.lm.bundled import DEFAULT_BUNDLED
from tests.eval.fixtures import eval_plan
from tests.eval import fixtures as fx
from tests.fakes import method_factory

cli = CliRunner()


@pytest.fixture
def built(monkeypatch):
    """The methods the runner builds (none when a command fails before answering)."""
    made: list = []
    monkeypatch.setattr(runner, "default_method_factory", method_factory({}, built=made))
    return made


def flat(result):
    return " ".join(result.output.split())


def evaluate(data, out, *extra, dataset="jsonl"):
    return cli.invoke(app, ["eval", "--dataset", dataset, "--data", str(data), "--method", "direct",
                            "--out", str(out), *extra])


def test_a_model_typo_writes_nothing_and_the_corrected_command_then_runs(tmp_path, built):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(3))
    out = tmp_path / "run"
    r = evaluate(data, out, "--model", "hf:/nonexistent")
    assert r.exit_code == 1 and "no such directory /nonexistent" in flat(r), r.output
    assert "Repo id" not in r.output and not out.exists() and not built
    (tmp_path / "empty-model").mkdir()
    r = evaluate(data, out, "--model", f"hf:{tmp_path / 'empty-model'}")
    assert r.exit_code == 1 and "is an empty directory" in flat(r) and "tokenizer files" in flat(r), r.output
    assert not out.exists()

    # A run directory an older dynrag left with config.json and no answer takes the corrected
    # command's config instead of refusing it as "a different config".
    stale = eval_config(eval_plan(dataset="jsonl", data=data, method="direct", out=out, model="bundled"))
    stale["model"] = "hf:typo"
    out.mkdir()
    (out / "config.json").write_text(json.dumps(stale))
    r = evaluate(data, out)
    assert r.exit_code == 0, r.output
    assert "no question answered yet" in flat(r) and len(built) == 1
    assert json.loads((out / "config.json").read_text())["model"] == f"bundled:{DEFAULT_BUNDLED}"
    # once a question is answered, a different config is refused again
    r = evaluate(data, out, "--limit", "2")
    assert r.exit_code == 1 and "different config" in flat(r)


def test_the_baseline_is_checked_before_any_question(tmp_path, built):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(3))
    out = tmp_path / "run"
    r = evaluate(data, out, "--baseline", str(tmp_path / "nowhere"))
    assert r.exit_code == 1 and "--baseline" in r.output and "not a run directory" in flat(r)
    assert not out.exists() and not built
    other = fx.write_jsonl(tmp_path / "other.jsonl", fx.qa_rows(2))
    assert evaluate(other, tmp_path / "base").exit_code == 0
    built.clear()
    r = evaluate(data, out, "--baseline", str(tmp_path / "base"))
    assert r.exit_code == 1 and "different data" in flat(r) and not out.exists() and not built


def test_each_command_refuses_a_directory_of_another_kind_or_unrelated_files(tmp_path, built):
    hotpot = fx.write_json(tmp_path / "hotpot.json", fx.HOTPOT)
    run = tmp_path / "eval-run"
    r = cli.invoke(app, ["eval", "--dataset", "hotpotqa", "--data", str(hotpot), "--method", "single",
                         "--corpus", "contexts", "--out", str(run)])
    assert r.exit_code == 0, r.output
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}

    retrieval = ["eval-retrieval", "--dataset", "hotpotqa", "--data", str(hotpot), "--retriever-option", "backend=numpy"]
    r = cli.invoke(app, [*retrieval, "--out", str(run)])
    assert r.exit_code == 1 and "holds a `dynrag eval` run" in flat(r), r.output
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before  # untouched

    ret_run = tmp_path / "retrieval-run"
    assert cli.invoke(app, [*retrieval, "--out", str(ret_run)]).exit_code == 0
    assert json.loads((ret_run / "config.json").read_text())["format"] == "dynrag-retrieval-run/1"
    assert cli.invoke(app, [*retrieval, "--out", str(ret_run)]).exit_code == 0  # its own kind: rerun
    r = evaluate(hotpot, ret_run, dataset="hotpotqa")
    assert r.exit_code == 1 and "holds a `dynrag eval-retrieval` run" in flat(r)
    r = cli.invoke(app, ["compare", str(ret_run)])
    assert r.exit_code == 1 and "compare reads `dynrag eval` runs" in flat(r)

    photos = tmp_path / "photos"
    photos.mkdir()
    (photos / "holiday.jpg").write_bytes(b"\xff\xd8")
    for command in (evaluate(hotpot, photos, dataset="hotpotqa"), cli.invoke(app, [*retrieval, "--out", str(photos)])):
        assert command.exit_code == 1 and "not a dynrag run directory" in flat(command) and "holiday.jpg" in flat(command)
    assert sorted(p.name for p in photos.iterdir()) == ["holiday.jpg"]  # not even a lock file

    index = run / "contexts-index"
    r = evaluate(hotpot, index, dataset="hotpotqa")
    assert r.exit_code == 1 and "is an index directory" in flat(r)

    r = cli.invoke(app, ["eval", "--dataset", "hotpotqa", "--data", str(hotpot), "--method", "single",
                         "--corpus", "contexts", "--out", str(run), "--baseline", str(ret_run)])
    assert r.exit_code == 1 and "not a `dynrag eval` run" in flat(r)
