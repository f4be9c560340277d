"""dynrag.config: run configuration files, flags over them, key-path errors, and reproducing a run
from the config.yaml its run directory keeps."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from dynrag.cli import app
from dynrag.config import RunConfig, load_run_config, read_config_file, require
from dynrag.errors import ConfigError, DataError
from dynrag.eval import runner
from dynrag.eval.runner import run_yaml
from tests.eval import fixtures as fx
from tests.fakes import method_factory

DOCS = Path(__file__).resolve().parents[1] / "docs" / "evaluation.md"
cli = CliRunner()


def write(path: Path, data) -> Path:
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


def documented_example() -> dict:
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("## Configuration files"):]
    return yaml.safe_load(re.search(r"```yaml\n(.*?)```", section, re.S).group(1))


def test_the_documented_complete_file_is_valid_and_has_every_key():
    example = documented_example()
    assert set(example) == set(RunConfig.model_fields)
    config = RunConfig(**example)
    assert config.method == "dragin" and config.retriever_options == {"alpha": 0.3, "fusion": "minmax"}
    assert config.cutoffs == [3, 10]


def test_flags_override_the_file_and_pairs_merge_key_by_key(tmp_path):
    path = write(tmp_path / "run.yaml", {"method": "flare", "limit": 5, "options": {"theta": 0.2, "k": 2},
                                         "retriever": "hybrid", "retriever_options": {"alpha": 0.5}})
    config = load_run_config(path, {"limit": 7, "method": None}, ["theta=0.3"], ["fusion=rrf"])
    assert (config.method, config.limit) == ("flare", 7)
    assert config.options == {"theta": "0.3", "k": 2}
    assert config.retriever_options == {"alpha": 0.5, "fusion": "rrf"}
    assert load_run_config(None, {}).model == "bundled"


@pytest.mark.parametrize(
    "data, pairs, message",
    [
        ({"retriever": "hybrid", "retriever_options": {"alpah": 0.3}}, {},
         r"run.yaml: retriever_options.alpah of retriever 'hybrid': unknown option; valid options: alpha, "),
        ({"method": "dragin", "options": {"tehta": 0.1}}, {},
         r"run.yaml: options.tehta of method 'dragin': unknown option; valid options: .*theta"),
        ({"methd": "single"}, {}, r"run.yaml: methd: unknown key; valid keys: method, "),
        ({"method": "flare", "options": {"theta": "high"}}, {},
         r"run.yaml: options.theta of method 'flare': must be a number \(got 'high'\)$"),
        ({"limit": 0}, {}, r"run.yaml: limit: must be at least 1 \(got 0\)$"),
        ({"method": "flare"}, {"options": ["tehta=1"]}, r"^--option tehta of method 'flare': unknown option; valid options: "),
        ({"method": "nope"}, {}, r"unknown method 'nope'; choose one of: direct, single"),
        ({"options": [1, 2]}, {}, r"run.yaml: options: expected a mapping of KEY: VALUE, got list"),
        ({"k": [0, 3]}, {}, r"run.yaml: cutoffs: cut-offs must be >= 1$"),
    ],
)
def test_errors_name_the_key_path_and_where_it_came_from(tmp_path, data, pairs, message):
    from dynrag.run.plan import make_plan

    path = write(tmp_path / "run.yaml", data)
    with pytest.raises(ConfigError, match=message):  # options are checked once, by the plan
        make_plan(load_run_config(path, {}, pairs.get("options", ()), pairs.get("retriever_options", ())),
                  command="serve")


def test_a_bad_file_names_the_file_and_line(tmp_path):
    with pytest.raises(DataError, match=r"run.yaml:2: not valid YAML \(mapping values are not allowed here\)"):
        read_config_file(write(tmp_path / "run.yaml", "method: single\n  limit: 3\n"))
    with pytest.raises(DataError, match="a run configuration is a mapping"):
        read_config_file(write(tmp_path / "list.yaml", "- a\n- b\n"))
    with pytest.raises(DataError, match="cannot read"):
        read_config_file(tmp_path / "missing.yaml")
    assert read_config_file(write(tmp_path / "empty.yaml", "")) == {}
    with pytest.raises(DataError, match=r"bad.yaml: options.exemplars cannot be encoded as UTF-8: character 2 "):
        read_config_file(write(tmp_path / "bad.yaml", 'options:\n  exemplars: "x\\udcff"\n'))
    with pytest.raises(ConfigError, match=r"--dataset is required \(or `dataset:` in --config\)"):
        require(RunConfig(method="single"), "dataset", "data", "method", "out")


def test_every_key_the_runner_saves_is_a_run_config_key(tmp_path):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(2))
    plan = fx.eval_plan(dataset="jsonl", data=data, method="single", out=tmp_path / "run", corpus="contexts")
    saved = run_yaml(runner.eval_config(plan), plan)
    assert set(saved) <= set(RunConfig.model_fields)
    RunConfig(**saved)


@pytest.fixture
def fake_model(monkeypatch):
    rows = fx.qa_rows(4)
    answers = {r["question"]: r["answers"][0] for r in rows[:3]}
    monkeypatch.setattr(runner, "default_method_factory", method_factory(answers))
    return rows


def test_eval_config_file_then_rerun_from_the_saved_config(tmp_path, fake_model, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fx.write_jsonl(tmp_path / "qa.jsonl", fake_model)
    write(tmp_path / "run.yaml", {"dataset": "jsonl", "data": "qa.jsonl", "method": "single", "corpus": "contexts",
                                  "limit": 3, "options": {"k": 2}, "out": "runs/a"})
    r = cli.invoke(app, ["eval", "--config", "run.yaml"])
    assert r.exit_code == 0, r.output
    run = tmp_path / "runs" / "a"
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["options"]["k"] == 2 and saved["model"].startswith("bundled:") and saved["limit"] == 3
    assert saved["data"] == str((tmp_path / "qa.jsonl").resolve()) and saved["out"] == str(run.resolve())
    before = (run / "predictions.jsonl").read_text()

    # the saved config resumes the same run: nothing answered twice
    r = cli.invoke(app, ["eval", "--config", str(run / "config.yaml")])
    assert r.exit_code == 0, r.output
    assert (run / "predictions.jsonl").read_text() == before
    # ... and, into another directory, reproduces it
    r = cli.invoke(app, ["eval", "--config", str(run / "config.yaml"), "--out", "runs/b"])
    assert r.exit_code == 0, r.output
    strip = lambda path: [{k: v for k, v in json.loads(x).items() if k != "seconds"} for x in path.read_text().splitlines()]
    assert strip(tmp_path / "runs" / "b" / "predictions.jsonl") == strip(run / "predictions.jsonl")
    assert json.loads((tmp_path / "runs/b/config.json").read_text())["options"] == json.loads(
        (run / "config.json").read_text())["options"]
    # a flag over the saved file changes the config: refused into the same directory
    r = cli.invoke(app, ["eval", "--config", str(run / "config.yaml"), "--limit", "4"])
    assert r.exit_code == 1 and "limit: 3 -> 4" in r.output.replace("\n", "")


def test_an_old_run_directory_without_config_yaml_resumes_and_gains_one(tmp_path, fake_model):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fake_model)
    common = ["eval", "--dataset", "jsonl", "--data", str(data), "--method", "single", "--corpus", "contexts",
              "--limit", "2", "--out", str(tmp_path / "old")]
    assert cli.invoke(app, common).exit_code == 0
    run = tmp_path / "old"
    (run / "config.yaml").unlink()
    config = json.loads((run / "config.json").read_text())
    del config["options"]["compress_ratio"]  # written before that option existed
    (run / "config.json").write_text(json.dumps(config))
    r = cli.invoke(app, common)
    assert r.exit_code == 0, r.output
    assert (run / "config.yaml").exists()
    assert len((run / "predictions.jsonl").read_text().splitlines()) == 2


def test_ask_reads_the_same_file(tmp_path):
    from dynrag.corpus import Passage
    from dynrag.retrieval.bm25 import BM25Index

    BM25Index.build([Passage("a", "Alpha", "The alpha bridge spans the river.")], tmp_path / "idx", progress=False)
    path = write(tmp_path / "run.yaml", {"method": "flare", "index": str(tmp_path / "idx"),
                                         "options": {"tehta": 0.1}})
    r = cli.invoke(app, ["ask", "Who?", "--config", str(path)])
    assert r.exit_code == 1 and "options.tehta of method 'flare': unknown option" in r.output.replace("\n", "")
    r = cli.invoke(app, ["ask", "Who?", "--config", str(path), "--method", "direct"])
    assert r.exit_code == 1 and "options.tehta of method 'direct': unknown option" in r.output.replace("\n", "")
