"""One writer per run directory: real processes, a real flock, kill -9.

Before the lock, two `eval` processes on one --out each answered every question and appended it,
so predictions.jsonl held each id twice and the summary counted them twice.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dynrag.io.rundir import read_predictions
from dynrag.eval.runner import run_eval
from dynrag.io.jsonl import json_line
from tests.eval.fixtures import eval_plan
from tests.eval import fixtures as fx
from tests.fakes import method_factory
from tests.waiting import HANG_GUARD_S, wait_for

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
import time
from pathlib import Path
sys.path.insert(0, {repo!r})
from dynrag.errors import DynragError
from dynrag.eval.runner import run_eval
from tests.eval.fixtures import eval_plan
from tests.fakes import method_factory

GO = Path({go!r})  # after its first answer the run waits for this file, so a test can act mid-run
make = method_factory({{}}, sleep={sleep})

def factory(config, retriever):
    method = make(config, retriever)
    answer = method.answer

    def gated(question):
        if method.calls:
            while not GO.exists():
                time.sleep(0.02)
        return answer(question)

    method.answer = gated
    return method

req = eval_plan(dataset="jsonl", data=Path({data!r}), method="single", out=Path({out!r}), corpus="contexts")
try:
    summary = run_eval(req, method_factory=factory, progress=False)
except DynragError as exc:
    print("error:", exc, file=sys.stderr)
    sys.exit(1)
print("n =", summary["n"])
"""


def start(tmp_path, data, out, sleep=0.0, name="run_eval.py", go=True):
    """An eval in its own process; unless ``go``, it stops after one answer until tmp_path/go exists."""
    script = tmp_path / name
    gate = tmp_path / "go"
    if go:
        gate.touch()
    script.write_text(SCRIPT.format(repo=str(REPO), data=str(data), out=str(out), sleep=sleep, go=str(gate)))
    return subprocess.Popen(
        [sys.executable, str(script)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for_lines(proc, path, n):
    def written() -> bool:
        return path.exists() and path.read_text().count("\n") >= n

    wait_for(lambda: written() or proc.poll() is not None, f"{n} predictions in {path}")
    if not written():
        pytest.fail(f"the run ended early: {proc.stderr.read()}")


def ids(out):
    return [json.loads(line)["id"] for line in (out / "predictions.jsonl").read_text().splitlines()]


def started_run(tmp_path, n):
    """(data, out, process) of an eval of n questions that has answered one and waits for tmp_path/go."""
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(n))
    out = tmp_path / "run"
    proc = start(tmp_path, data, out, go=False)
    try:
        wait_for_lines(proc, out / "predictions.jsonl", 1)
    except BaseException:
        proc.kill()
        raise
    return data, out, proc


@pytest.mark.slow  # over a second of CPU: `make test` runs it, `make test-fast` does not
def test_second_eval_on_the_same_out_fails_at_once_naming_the_holder(tmp_path):
    data, out, first = started_run(tmp_path, 8)
    try:
        second = start(tmp_path, data, out, name="second.py", go=False)
        _, err = second.communicate(timeout=HANG_GUARD_S)
        assert second.returncode == 1, err
        assert f"pid {first.pid}" in err and str(out) in err, err
        assert first.poll() is None  # it failed while the first was still answering
        (tmp_path / "go").touch()
        first_out, first_err = first.communicate(timeout=HANG_GUARD_S)
    finally:
        first.kill() if first.poll() is None else None
    assert first.returncode == 0, first_err
    assert "n = 8" in first_out
    assert sorted(ids(out)) == sorted(f"q{i}" for i in range(8))  # each question once


def test_kill_9_frees_the_lock_and_the_next_run_resumes(tmp_path):
    data, out, proc = started_run(tmp_path, 6)
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=HANG_GUARD_S)
    finally:
        proc.kill() if proc.poll() is None else None
    assert (out / ".lock").exists()  # the lock file stays; the OS dropped the lock itself
    req = eval_plan(dataset="jsonl", data=data, method="single", out=out, corpus="contexts")
    summary = run_eval(req, method_factory=method_factory({}), progress=False)
    assert summary["n"] == 6 and sorted(ids(out)) == sorted(f"q{i}" for i in range(6))


def test_a_run_damaged_by_two_writers_is_deduplicated_on_resume_and_says_so(tmp_path, capsys):
    from rich.console import Console

    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(5))
    out = tmp_path / "run"
    req = eval_plan(dataset="jsonl", data=data, method="single", out=out, corpus="contexts")
    run_eval(req, method_factory=method_factory({}), progress=False)
    # what two unlocked writers left behind: every question answered and appended twice
    records = read_predictions(out)
    with open(out / "predictions.jsonl", "a", encoding="utf-8") as f:
        f.write("".join(json_line({**r, "prediction": "second writer"}) for r in records))
    assert len(ids(out)) == 10

    console = Console(stderr=True, width=200)
    summary = run_eval(req, method_factory=method_factory({}), progress=False, console=console)
    assert summary["n"] == 5
    assert ids(out) == [r["id"] for r in records]  # the first answer of each id is kept
    assert all(r["prediction"] != "second writer" for r in read_predictions(out))
    err = capsys.readouterr().err
    assert "5 duplicate" in err and "predictions.jsonl" in err
