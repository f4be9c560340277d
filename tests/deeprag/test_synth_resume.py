"""`dynrag synth` killed with SIGKILL mid-run, then rerun: every question exactly once."""

import json
from collections import Counter

import pytest

from tests.deeprag.conftest import write_wiki
from tests.deeprag.killing import kill_when, run_dynrag


def lines(path):
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()] if path.exists() else []


@pytest.mark.slow
def test_synth_resumes_after_kill_9_without_redoing_or_duplicating(tmp_path, tiny_model_dir):
    data = write_wiki(tmp_path / "train.json", 48)
    out = tmp_path / "synth"
    args = ["synth", "--dataset", "2wikimultihopqa", "--data", str(data), "--out", str(out), "--teacher", "dataset",
            "--model", f"hf:{tiny_model_dir}", "--max-nodes", "3", "--shots", "0", "--no-progress"]

    def finished():
        return len(lines(out / "trajectories.jsonl")) + len(lines(out / "skipped.jsonl"))

    kill_when(args, lambda: finished() >= 3)
    first = finished()
    assert 3 <= first < 48
    done = run_dynrag(args)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resuming {out}" in done.stderr.replace("\n", "")
    ids = [r["id"] for r in lines(out / "trajectories.jsonl") + lines(out / "skipped.jsonl")]
    assert Counter(ids) == Counter(f"q{i}" for i in range(48))  # each exactly once
    summary = json.loads(done.stdout)
    assert summary["questions"] == 48
