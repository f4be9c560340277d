"""Each bad input to `dynrag tune` is one line naming it, and an existing tune keeps every file."""

import hashlib

import pytest

from dynrag.eval import runner
from tests.cli_inprocess import run_in_process
from tests.eval import fixtures as fx
from tests.tune.doubles import peaked
from tests.tune.test_tune import study_trials, tune

SPACE = ("--space", "theta=0.5,1.5", "--trials", "2", "--sampler", "grid")


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A finished two-trial tune that every bad command below is pointed at."""
    tmp = tmp_path_factory.mktemp("tuned")
    rows = fx.qa_rows(4)
    data = fx.write_jsonl(tmp / "dev.jsonl", rows)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runner, "default_method_factory", peaked(rows))
        r = tune(data, tmp / "t", *SPACE)
    assert r.returncode == 0, r.stderr
    return data, tmp / "t"


def snapshot(out):
    files = {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted(out.rglob("*")) if p.is_file() and p.name != "study.db" and p.name != ".lock"}
    return files, study_trials(out)


@pytest.mark.parametrize("args, message", [
    (("--space", "theta=0.5:0.5", "--trials", "2"), "--space theta=0.5:0.5: the range is empty"),
    (("--space", "theta=2:1", "--trials", "2"), "--space theta=2:1: the range is inverted"),
    (("--space", "theta=high:2", "--trials", "2"), "--space theta=high:2: low end 'high' is not a number"),
    (("--space", "query_words=10,many", "--trials", "2"), "--space query_words=10,many: value 'many' is not a number"),
    (("--space", "thetta=0.5:2", "--trials", "2"), "--space thetta=0.5:2: unknown option 'thetta' of method 'dragin'; valid options:"),
    ((*SPACE, "--metric", "emm"), "--metric emm: not a figure of a run's summary; choose one of: em, f1"),
    ((*SPACE, "--metric", "accuracy"), "--metric accuracy: jsonl is not a yes/no dataset"),
    ((*SPACE, "--also", "cost"), "--also cost: not a figure of a run's summary"),
    (("--space", "theta=0.5,1.5", "--trials", "0"), "--trials 0: a tune runs at least 1 trial"),
    ((*SPACE, "--storage", "postgresql://nobody@127.0.0.1:9/nothing"),
     "--storage postgresql://nobody@127.0.0.1:9/nothing: cannot open the study storage ("),
    ((*SPACE, "--storage", "mysql://h/db"), "--storage mysql://h/db: expected sqlite:///FILE or postgresql://"),
    (("--space", "theta=0.5,1.0,1.5", "--trials", "3", "--sampler", "grid"),
     "/t: this study was made with --space theta=0.5,1.5; now --space theta=0.5,1,1.5 (rerun with the study's "
     "settings or choose a new --out)"),
    ((*SPACE, "--metric", "f1"), "/t: this study was made with metric=em; now metric=f1 (rerun with"),
    (("--space", "theta=0.5,1.5", "--trials", "2"), "/t: this study was made with sampler=grid; now sampler=tpe or random"),
    ((*SPACE, "--option", "theta=0.3"), "--option theta: also searched by --space theta (give it one or the other)"),
    (("--space", "theta=0.5:2", "--trials", "2", "--sampler", "grid"), "--sampler grid needs a list A,B,C or a range with a step"),
    (("--space", "theta=1,2", "--trials", "2", "--sampler", "anneal"), "--sampler anneal: choose one of: tpe, grid, random"),
])
def test_bad_input_is_one_line_and_loses_nothing(tuned, args, message):
    data, out = tuned
    before = snapshot(out)
    r = tune(data, out, *args)
    assert r.returncode == 1, (r.stdout, r.stderr)
    line = r.stderr.strip()
    assert "\n" not in line and "Traceback" not in line and message in line, line
    assert snapshot(out) == before


def test_report_of_a_directory_without_a_tune(tmp_path):
    r = run_in_process("tune", "--out", tmp_path / "none", "--report")
    assert r.returncode == 1 and "holds no tune (tune.json is missing)" in r.stderr and "\n" not in r.stderr.strip()


def test_a_missing_space_or_trial_count(tmp_path, tuned):
    data, _ = tuned
    r = tune(data, tmp_path / "x", "--trials", "2")
    assert r.returncode == 1 and "--space is required" in r.stderr
    r = tune(data, tmp_path / "x", "--space", "theta=1,2")
    assert r.returncode == 1 and "--trials is required" in r.stderr
    assert not (tmp_path / "x").exists()


def test_an_out_directory_of_other_files_is_refused_and_left_alone(tmp_path, tuned):
    data, _ = tuned
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    r = tune(data, tmp_path / "other", *SPACE)
    assert r.returncode == 1 and "--out" in r.stderr and "is not a tune directory" in r.stderr
    assert [p.name for p in (tmp_path / "other").iterdir()] == ["notes.txt"]


def test_a_changed_run_setting_names_each_key_that_differs_with_both_values(tuned):
    data, out = tuned
    before = snapshot(out)
    r = tune(data, out, *SPACE, "--limit", "3", "--option", "query_words=12")
    assert r.returncode == 1
    assert r.stderr.strip() == (f"error: --out {out}: this study was made with options.query_words=25, limit=none; "
                                "now options.query_words=12, limit=3 (rerun with the study's settings or choose a new --out)")
    assert snapshot(out) == before


def test_a_searched_option_fixed_by_a_flag_is_refused_before_anything_is_written(tmp_path, tuned):
    data, _ = tuned
    r = tune(data, tmp_path / "x", "--space", "theta=0.3:2.0", "--trials", "2", "--option", "theta=0.3")
    assert r.returncode == 1
    assert r.stderr.strip() == "error: --option theta: also searched by --space theta (give it one or the other)"
    assert not (tmp_path / "x").exists()


def test_help_marks_space_and_trials_required_and_the_report_alone_needs_neither(tuned):
    _, out = tuned
    text = run_in_process("tune", "--help", env={"COLUMNS": "120"}).stdout
    for flag in ("--space NAME=SPEC", "--trials N"):
        after = text.split(flag, 1)[1].split("\n  --", 1)[0]
        assert " ".join(after.split()).startswith("Required:"), (flag, after)
    alone = run_in_process("tune", "--out", out, "--report")
    assert alone.returncode == 0, alone.stderr
    assert "| trial | state | theta | em |" in alone.stdout
