"""The real runner, real run-directory files and the real BM25 index, with a fast fake method."""

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dynrag.errors import ConfigError, DataError
from dynrag.io.rundir import read_predictions
from dynrag.eval.runner import eval_config, run_eval
from tests.eval.fixtures import eval_plan
from dynrag.eval.summary import METRIC_KEYS, summarize
from tests.eval import fixtures as fx
from tests.fakes import method_factory
from tests.waiting import kill_when

REPO = Path(__file__).resolve().parents[2]


def rows_and_answers(n):
    rows = fx.qa_rows(n)
    # even questions answered right, odd ones wrong
    answers = {r["question"]: (r["answers"][0] if i % 2 == 0 else "nowhere") for i, r in enumerate(rows)}
    return rows, answers


def request(tmp_path, data, **kw):
    base = dict(dataset="jsonl", data=data, method="single", out=tmp_path / "run", corpus="contexts")
    base.update(kw)
    return eval_plan(**base)


def lines(run_dir):
    return (Path(run_dir) / "predictions.jsonl").read_text().splitlines()


def test_full_run_writes_all_files_and_summary_recomputes(tmp_path):
    rows, answers = rows_and_answers(6)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    built = []
    summary = run_eval(request(tmp_path, data), method_factory=method_factory(answers, built=built), progress=False)
    run = tmp_path / "run"
    assert len(built) == 1  # model/method and index set up once per run
    config = json.loads((run / "config.json").read_text())
    assert {k: config[k] for k in ("method", "dataset", "corpus", "limit", "exemplars", "model")} == {
        "method": "single", "dataset": "jsonl", "corpus": "contexts", "limit": None, "exemplars": "default",
        "model": config["model"],
    }
    assert config["model"].startswith("bundled:") and config["options"]["k"] == 3
    assert config["data"] == str(data.resolve()) and len(config["data_sha256"]) == 64
    assert (run / "contexts-index" / "manifest.json").exists()
    index_manifest = json.loads((run / "contexts-index" / "manifest.json").read_text())
    assert index_manifest["passage_count"] == 7  # 6 mills + the shared harbour paragraph, pooled once

    preds = read_predictions(run)
    assert [p["id"] for p in preds] == [f"q{i}" for i in range(6)]
    p0 = preds[0]
    assert p0["em"] == 1.0 and preds[1]["em"] == 0.0
    assert p0["retrievals"] == 1 and p0["queries"] == [rows[0]["question"]]
    assert p0["support_found"] == p0["support"] and len(p0["support"]) == 1
    assert p0["generated_tokens"] > 0 and p0["seconds"] >= 0
    for key in ("id", "question", "answers", "prediction", "final_answer", "em", "f1", "retrievals", "queries",
                "generated_tokens", "seconds"):
        assert key in p0

    on_disk = json.loads((run / "summary.json").read_text())
    assert on_disk == summary
    recomputed = summarize(preds, dataset_has_support=True, yes_no=False)
    assert {k: on_disk[k] for k in METRIC_KEYS} == {k: recomputed[k] for k in METRIC_KEYS}
    assert summary["em"] == 0.5 and summary["retrievals_per_question"] == 1.0 and summary["support_recall"] == 1.0
    assert (summary["method"], summary["dataset"]) == ("single", "jsonl")
    assert "| EM (%) | 50.0 |" in (run / "summary.md").read_text()


class Crash(Exception):
    pass


def crashing_factory(answers, after):
    make = method_factory(answers)

    def build(config, retriever):
        method = make(config, retriever)
        real = method.answer

        def answer(q):
            if len(method.calls) >= after:
                raise Crash()
            return real(q)

        method.answer = answer
        return method

    return build


def test_resume_skips_finished_ids_and_reuses_index(tmp_path, capsys):
    rows, answers = rows_and_answers(5)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    with pytest.raises(Crash):
        run_eval(request(tmp_path, data), method_factory=crashing_factory(answers, after=2), progress=False)
    assert len(lines(tmp_path / "run")) == 2
    assert not (tmp_path / "run" / "summary.json").exists()
    index_mtime = (tmp_path / "run" / "contexts-index" / "manifest.json").stat().st_mtime_ns

    built = []
    from rich.console import Console

    console = Console(record=True, width=200)
    summary = run_eval(request(tmp_path, data), method_factory=method_factory(answers, built=built), progress=False, console=console)
    assert len(built) == 1 and len(built[0][2].calls) == 3  # only the unfinished questions
    assert [json.loads(l)["id"] for l in lines(tmp_path / "run")] == ["q0", "q1", "q2", "q3", "q4"]
    assert summary["n"] == 5
    text = console.export_text()
    assert "resuming" in text and "2 of 5" in text and "reusing" in text
    assert (tmp_path / "run" / "contexts-index" / "manifest.json").stat().st_mtime_ns == index_mtime

    # a finished run: nothing is answered, the method (model) is not even built
    built.clear()
    again = run_eval(request(tmp_path, data), method_factory=method_factory(answers, built=built), progress=False)
    assert built == [] and again == summary and len(lines(tmp_path / "run")) == 5


def test_truncated_last_line_is_dropped_and_rewritten(tmp_path):
    rows, answers = rows_and_answers(4)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    run_eval(request(tmp_path, data, limit=2), method_factory=method_factory(answers), progress=False)
    pred_file = tmp_path / "run" / "predictions.jsonl"
    good = pred_file.read_text().splitlines(keepends=True)
    # a crash mid-write of the second record: its line is cut short
    pred_file.write_text(good[0] + good[1][: len(good[1]) // 2])
    run_eval(request(tmp_path, data, limit=2), method_factory=method_factory(answers), progress=False)
    ids = [json.loads(l)["id"] for l in lines(tmp_path / "run")]
    assert ids == ["q0", "q1"]


def test_corrupt_middle_line_is_an_error(tmp_path):
    rows, answers = rows_and_answers(3)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    run_eval(request(tmp_path, data), method_factory=method_factory(answers), progress=False)
    pred_file = tmp_path / "run" / "predictions.jsonl"
    text = pred_file.read_text().splitlines(keepends=True)
    pred_file.write_text(text[0] + "garbage\n" + "".join(text[1:]))
    with pytest.raises(DataError, match=r"predictions\.jsonl:2: not valid JSON: expecting value at column 1"):
        run_eval(request(tmp_path, data), method_factory=method_factory(answers), progress=False)


def test_different_config_is_an_error_naming_the_keys(tmp_path):
    rows, answers = rows_and_answers(3)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    run_eval(request(tmp_path, data, limit=2), method_factory=method_factory(answers), progress=False)
    with pytest.raises(ConfigError) as e:
        run_eval(request(tmp_path, data, limit=3, options={"k": "5"}), method_factory=method_factory(answers), progress=False)
    msg = str(e.value)
    assert "different config" in msg and "limit: 2 -> 3" in msg and "options:" in msg
    assert "dataset" not in msg
    # the same options spelled differently resolve to the same config: resumes fine
    run_eval(request(tmp_path, data, limit=2, options={"k": "3"}), method_factory=method_factory(answers), progress=False)
    # changed data file
    fx.write_jsonl(data, rows[:2])
    with pytest.raises(ConfigError, match="data_sha256"):
        run_eval(request(tmp_path, data, limit=2), method_factory=method_factory(answers), progress=False)


def test_bad_requests_fail_before_any_work(tmp_path):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(2))
    with pytest.raises(ConfigError, match="pass --corpus"):
        run_eval(request(tmp_path, data, corpus=None), method_factory=method_factory(), progress=False)
    with pytest.raises(ConfigError, match="--option nope of method 'single': unknown option; valid options: "):
        run_eval(request(tmp_path, data, options={"nope": "1"}), method_factory=method_factory(), progress=False)
    with pytest.raises(ConfigError, match="unknown method"):
        run_eval(request(tmp_path, data, method="nope"), method_factory=method_factory(), progress=False)
    with pytest.raises(ConfigError, match="--aliases applies"):
        run_eval(request(tmp_path, data, aliases=data), method_factory=method_factory(), progress=False)
    assert not (tmp_path / "run").exists()


def test_direct_run_needs_no_index_and_baseline_adds_boundary_figures(tmp_path):
    rows, answers = rows_and_answers(4)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    built = []
    direct = run_eval(request(tmp_path, data, method="direct", corpus="contexts", out=tmp_path / "direct"),
                      method_factory=method_factory(answers, built=built), progress=False)
    assert built[0][1] is None and not (tmp_path / "direct" / "contexts-index").exists()
    assert json.loads((tmp_path / "direct" / "config.json").read_text())["corpus"] is None
    assert direct["retrievals_per_question"] == 0.0 and direct["em"] == 0.5
    # the fake single run retrieves on every question: it never predicts the positive class
    # ("did not retrieve"), so F1 is 0; the 2 right direct answers are its false negatives
    single = run_eval(request(tmp_path, data, baseline=tmp_path / "direct"), method_factory=method_factory(answers), progress=False)
    kb = single["knowledge_boundary"]
    assert (kb["tp"], kb["fp"], kb["fn"], kb["tn"]) == (0, 0, 2, 2)
    assert kb["f1"] == 0.0 and kb["accuracy"] == 0.5 and kb["mcc"] == 0.0 and kb["baseline_method"] == "direct"
    assert "Knowledge boundary" in (tmp_path / "run" / "summary.md").read_text()


def model_dir(path, base=None):
    """A directory `hf:PATH` accepts; with `base`, marked as a dynrag checkpoint trained from it."""
    path.mkdir()
    (path / "config.json").write_text("{}")
    if base:
        (path / "deeprag.json").write_text(json.dumps({"stage": "imitation", "base_model": base}))
    return f"hf:{path}"


def test_the_baseline_must_be_the_same_base_model_answering_without_retrieval(tmp_path):
    from dynrag.lm.loader import resolve_model

    rows, answers = rows_and_answers(3)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    run_eval(request(tmp_path, data, method="direct", out=tmp_path / "direct"), method_factory=method_factory(answers),
             progress=False)
    run_eval(request(tmp_path, data, out=tmp_path / "single"), method_factory=method_factory(answers), progress=False)
    with pytest.raises(ConfigError, match=r"--baseline .*single: its 'single' run retrieved on 3 of 3 questions; "
                                          r"the baseline must never retrieve"):
        run_eval(request(tmp_path, data, out=tmp_path / "x", baseline=tmp_path / "single"), method_factory=method_factory(answers))
    other = model_dir(tmp_path / "other")
    with pytest.raises(ConfigError, match=r"--baseline .*direct: made with model 'bundled:.*', but this run's model "
                                          r"'hf:.*other' has another base"):
        run_eval(request(tmp_path, data, out=tmp_path / "x", model=other, baseline=tmp_path / "direct"),
                 method_factory=method_factory(answers))
    assert not (tmp_path / "x").exists()  # refused before anything was written
    # checkpoints trained from the baseline's model (stage II from stage I from it) are compared with it
    imi = model_dir(tmp_path / "imi", base=resolve_model("bundled"))
    coc = model_dir(tmp_path / "coc", base=imi)
    summary = run_eval(request(tmp_path, data, out=tmp_path / "coc-run", model=coc, baseline=tmp_path / "direct"),
                       method_factory=method_factory(answers), progress=False)
    assert summary["knowledge_boundary"]["n"] == 3
    trained_elsewhere = model_dir(tmp_path / "imi2", base=other)
    with pytest.raises(ConfigError, match=r"'hf:.*imi2' \(trained from hf:.*other\) has another base"):
        run_eval(request(tmp_path, data, out=tmp_path / "x", model=trained_elsewhere, baseline=tmp_path / "direct"),
                 method_factory=method_factory(answers))


def test_yes_no_dataset_reports_accuracy(tmp_path):
    data = fx.write_json(tmp_path / "s.json", fx.STRATEGY)
    answers = {fx.STRATEGY[0]["question"]: "Yes, it was", fx.STRATEGY[1]["question"]: "Yes"}
    summary = run_eval(request(tmp_path, data, dataset="strategyqa"), method_factory=method_factory(answers), progress=False)
    assert summary["accuracy"] == 0.5 and summary["em"] == 0.5
    preds = read_predictions(tmp_path / "run")
    assert preds[0]["scored_answer"] == "yes"
    assert json.loads((tmp_path / "run" / "config.json").read_text())["exemplars"] == "strategyqa"


SCRIPT = """
import sys
from pathlib import Path
sys.path.insert(0, {repo!r})
from dynrag.eval.runner import eval_config, run_eval
from tests.eval.fixtures import eval_plan
from tests.fakes import FakeMethodFactory
req = eval_plan(dataset="jsonl", data=Path({data!r}), method="single", out=Path({out!r}), corpus="contexts")
run_eval(req, method_factory=FakeMethodFactory(log={log!r}, hold_first={held!r}), progress=False)
"""


@pytest.mark.slow  # over a second of CPU: `make test` runs it, `make test-fast` does not
def test_sigkill_mid_run_then_rerun_answers_every_question_once(tmp_path):
    rows = fx.qa_rows(12)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    out = tmp_path / "run"
    script = tmp_path / "run_eval.py"
    # The third question stays in flight until the kill, so the run is killed mid-run on any machine.
    script.write_text(SCRIPT.format(repo=str(REPO), data=str(data), out=str(out), log=str(tmp_path / "started.log"),
                                    held=rows[2]["question"]))
    proc = subprocess.Popen([sys.executable, str(script)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pred_file = out / "predictions.jsonl"
    kill_when(proc, lambda: pred_file.exists() and pred_file.read_text().count("\n") >= 2, "two predictions")
    assert proc.returncode == -signal.SIGKILL
    partial = [json.loads(l)["id"] for l in lines(out)]
    assert 2 <= len(partial) < 12

    # same request again, in-process this time, to completion
    req = eval_plan(dataset="jsonl", data=data, method="single", out=out, corpus="contexts")
    built = []
    summary = run_eval(req, method_factory=method_factory({}, built=built), progress=False)
    ids = [json.loads(l)["id"] for l in lines(out)]
    assert sorted(ids) == sorted(f"q{i}" for i in range(12)) and len(ids) == len(set(ids)) == 12
    assert ids[: len(partial)] == partial
    assert summary["n"] == 12


def test_corpus_dir_uses_a_built_index_and_matches_support_by_content(tmp_path):
    from dynrag.corpus.passage import Passage
    from dynrag.retrieval.bm25 import BM25Index

    rows = fx.qa_rows(3)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    # an external corpus: other ids, the same paragraphs with different spacing, plus noise
    passages = [Passage(f"p{i}", f"Mill {i}", "  " + r["contexts"][0]["text"].replace(" ", "  ")) for i, r in enumerate(rows)]
    passages.append(Passage("noise", "Noise", "Nothing about mills here."))
    BM25Index.build(passages, tmp_path / "index", progress=False)
    summary = run_eval(request(tmp_path, data, corpus=str(tmp_path / "index")), method_factory=method_factory(), progress=False)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["corpus"] == str((tmp_path / "index").resolve()) and len(config["corpus_sha256"]) == 64
    assert not (tmp_path / "run" / "contexts-index").exists()
    preds = read_predictions(tmp_path / "run")
    assert preds[0]["retrieved_ids"][0] == "p0" and preds[0]["support_found"] == preds[0]["support"]
    assert summary["support_recall"] == 1.0 and summary["support_all"] == 1.0


def test_retriever_choice_is_recorded_and_used(tmp_path):
    """--retriever dense: the real packaged embedder embeds the pooled contexts once, the method
    gets a dense retriever, and the choice is part of the run's config."""
    from dynrag.retrieval.dense import DenseIndex

    rows, answers = rows_and_answers(3)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    built = []
    run_eval(request(tmp_path, data, retriever="dense", retriever_options=["batch_size=8"]),
             method_factory=method_factory(answers, built=built), progress=False)
    config, retriever, method = built[0]
    assert isinstance(retriever, DenseIndex)
    assert (config["retriever"], config["retriever_options"]) == ("dense", {"batch_size": 8})
    assert (tmp_path / "run" / "contexts-index" / "dense").is_dir()
    # each question's first hit is one of its own context paragraphs (the fixture's answers are in them)
    records = [json.loads(line) for line in lines(tmp_path / "run")]
    assert all(r["retrievals"] == 1 for r in records)
    with pytest.raises(ConfigError, match=r"retriever: \"dense\" -> \"bm25\""):
        run_eval(request(tmp_path, data), method_factory=method_factory(answers), progress=False)


def test_preset_balanced_defaults_to_hybrid_and_old_runs_resume_as_bm25(tmp_path):
    rows, answers = rows_and_answers(2)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    config = eval_config(request(tmp_path, data, options={"preset": "balanced"}))
    assert (config["retriever"], config["retriever_options"]) == ("hybrid", {})
    # a run directory written before the retriever was recorded resumes as the bm25 run it was
    run_eval(request(tmp_path, data, limit=1), method_factory=method_factory(answers), progress=False)
    cfg_path = tmp_path / "run" / "config.json"
    old = json.loads(cfg_path.read_text())
    del old["retriever"], old["retriever_options"]
    cfg_path.write_text(json.dumps(old))
    resumed = run_eval(request(tmp_path, data, limit=1), method_factory=method_factory(answers), progress=False)
    assert resumed["n"] == 1
    with pytest.raises(ConfigError, match="retriever"):
        run_eval(request(tmp_path, data, limit=1, retriever="dense"), method_factory=method_factory(answers), progress=False)


def test_retriever_flags_on_a_method_that_does_not_retrieve_are_an_error(tmp_path):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(2))
    with pytest.raises(ConfigError, match="method 'direct' does not retrieve"):
        run_eval(request(tmp_path, data, method="direct", retriever="dense"), method_factory=method_factory(), progress=False)
    with pytest.raises(ConfigError, match=r"--retriever-option alpha of retriever 'bm25': unknown option"):
        run_eval(request(tmp_path, data, retriever_options=["alpha=0.3"]), method_factory=method_factory(), progress=False)
    assert not (tmp_path / "run").exists()


def test_cut_answers_are_recorded_and_counted_in_the_summary():
    from dynrag.corpus import Passage
    from dynrag.datasets.loaders import QAExample
    from dynrag.eval.summary import make_record, summarize, summary_markdown

    example = QAExample("q1", "Who?", ["Ada"], [Passage("p", "", "text")], [])
    base = {"answer": "Ada", "final_answer": "Ada", "retrievals": [], "generated_tokens": 3}
    records = [make_record(example, {**base, "cut": "cut after 512 decoded tokens (max_generated_tokens 512)"}, 1.0, False),
               make_record(example, base, 1.0, False)]
    assert records[0]["cut"].startswith("cut after 512") and "cut" not in records[1]
    summary = summarize(records, dataset_has_support=False, yes_no=False)
    assert summary["cut_answers"] == 1
    assert "| answers cut by the decoding budget | 1 |" in summary_markdown(summary)
