"""kill -9 in the middle of a trial, then the same command: the trial resumes its own run
directory, no question is answered twice and no trial is counted twice. SIGTERM instead stops the
worker processes with the command and queues the trial again."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.eval import fixtures as fx
from tests.tune.test_tune import predictions, study_trials
from tests.waiting import HANG_GUARD_S, kill_when, wait_for

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
sys.path.insert(0, {src!r})
from dynrag.eval import runner
from tests.eval import fixtures as fx
from tests.tune.doubles import peaked
rows = fx.qa_rows({n})
runner.default_method_factory = peaked(rows, log={log!r}, hold_first=rows[5]["question"], hold_at=1.0, held={held!r})
if __name__ == "__main__":  # worker processes are spawned, and import this file again
    from dynrag.cli import run
    sys.argv = ["dynrag", *sys.argv[1:]]
    run()
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _tune_command(tmp_path, *args):
    """8 questions, the sixth held in flight (once) at theta 1.0, each question asked logged with its pid."""
    rows = fx.qa_rows(8)
    data = fx.write_jsonl(tmp_path / "dev.jsonl", rows)
    out, log, held = tmp_path / "t", tmp_path / "asked.log", tmp_path / "held"
    script = tmp_path / "tune.py"
    script.write_text(SCRIPT.format(repo=str(REPO), src=str(REPO / "src"), n=8, log=str(log), held=str(held)))
    command = [sys.executable, str(script), "tune", "--dataset", "jsonl", "--data", str(data), "--corpus", "contexts",
               "--method", "dragin", "--out", str(out), "--sampler", "grid", *args]
    return rows, command, out, log, held


# A real `dynrag tune` process killed mid-trial: several seconds of CPU, so outside `make test-fast`.
@pytest.mark.slow
def test_kill_9_mid_trial_then_the_same_command_finishes_the_study(tmp_path):
    # grid order is seeded: theta 1.0 is held whichever trial it is
    rows, command, out, log, held = _tune_command(tmp_path, "--workers", "1", "--space", "theta=0.5,1.0,1.5",
                                                  "--trials", "3", "--seed", "0")
    proc = subprocess.Popen(command, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    kill_when(proc, held.exists, "the question held in flight at theta=1.0")
    running = [n for n, s in study_trials(out) if s == "RUNNING"]
    assert len(running) == 1
    killed_dir = out / "trials" / str(running[0])
    answered_before = predictions(killed_dir)
    assert len(answered_before) == 5  # questions 0-4, then held on the sixth

    done = subprocess.run(command, cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    assert done.returncode == 0, done.stderr
    assert f"trial(s) {running[0]} of a process that is gone: enqueued again" in done.stderr
    assert f"(resumes trial {running[0]})" in done.stderr
    states = study_trials(out)
    assert [s for _, s in states].count("COMPLETE") == 3 and [s for _, s in states].count("FAIL") == 1
    retry = running[0] + 1  # enqueued at once, so next in number: the killed trial's copy: it ran in the killed trial's directory
    dirs = sorted(p.name for p in (out / "trials").iterdir())
    assert len(states) == 4 and len(dirs) == 3 and killed_dir.name in dirs and str(retry) not in dirs
    for d in (out / "trials").iterdir():
        ids = predictions(d)
        assert sorted(ids) == sorted(r["id"] for r in rows), d  # every question once
    # the resumed trial asked only what the kill left unanswered (the held question again, and the rest)
    config = json.loads((killed_dir / "config.json").read_text())
    assert config["options"]["theta"] == 1.0
    asked = [line.split("\t", 1)[1] for line in log.read_text().splitlines()]
    for r in rows[:5]:
        assert asked.count(r["question"]) == 3  # once per trial: the resumed trial did not ask it again


# A real `dynrag tune` process killed mid-trial: several seconds of CPU, so outside `make test-fast`.
@pytest.mark.slow
def test_sigterm_mid_trial_stops_its_workers_and_queues_the_trial_again(tmp_path):
    _, command, out, log, held = _tune_command(tmp_path, "--workers", "2", "--space", "theta=1.0", "--trials", "1")
    # stderr to a file: a worker left running would hold a pipe open, and reading it would hang
    with open(tmp_path / "stderr.txt", "w") as err:
        proc = subprocess.Popen(command, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    try:
        wait_for(lambda: proc.poll() is not None or held.exists(), "a worker holding a question in flight")
        assert proc.poll() is None, (tmp_path / "stderr.txt").read_text()
        workers = {int(line.split("\t", 1)[0]) for line in log.read_text().splitlines()}
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(HANG_GUARD_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = (tmp_path / "stderr.txt").read_text()
    # the held worker never answers: only the command that started it can have stopped it
    left = [pid for pid in workers if _alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert workers and not left
    assert proc.returncode == 143 and "terminated" in stderr, stderr
    assert study_trials(out) == [(0, "FAIL"), (1, "WAITING")]
