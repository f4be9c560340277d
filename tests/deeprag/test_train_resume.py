"""`dynrag train imitation` killed with SIGKILL mid-run, then rerun: it continues from the
checkpoint step with the optimizer state, and ends where an uninterrupted run ends."""

import json

import torch
from safetensors.torch import load_file

import pytest

from tests.deeprag.killing import kill_when, run_dynrag
from tests.deeprag.trajectories import write_trajectories


def checkpoint_step(out):
    try:
        return json.loads((out / "checkpoint" / "state.json").read_text())["step"]
    except (OSError, ValueError):
        return 0


@pytest.mark.slow
def test_training_resumes_from_the_checkpoint_after_kill_9(tmp_path, tiny_model_dir):
    data = write_trajectories(tmp_path / "t.jsonl", 400)
    common = ["train", "imitation", "--data", str(data), "--model", f"hf:{tiny_model_dir}", "--batch-size", "2",
              "--lr", "1e-3", "--save-every", "10", "--threads", "1", "--no-progress"]
    out = tmp_path / "killed"
    kill_when([*common, "--out", str(out)], lambda: checkpoint_step(out) >= 20)
    saved = checkpoint_step(out)
    logged = [json.loads(l)["step"] for l in (out / "train_log.jsonl").read_text().splitlines() if l.endswith("}")]
    assert 20 <= saved < 200 and max(logged) >= saved
    assert not (out / "deeprag.json").exists()

    resumed = run_dynrag([*common, "--out", str(out)])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"from step {saved} of 200" in resumed.stderr.replace("\n", "")
    steps = [json.loads(l)["step"] for l in (out / "train_log.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 201))  # every step once: the ones after the checkpoint were redone, not repeated

    straight = tmp_path / "straight"
    plain = run_dynrag([*common, "--out", str(straight)])
    assert plain.returncode == 0, plain.stderr[-3000:]
    rates = [[json.loads(l)["lr"] for l in (d / "train_log.jsonl").read_text().splitlines()] for d in (out, straight)]
    assert rates[0] == rates[1] and rates[0][-1] == 0.0  # the resumed run stayed on the same cosine, to 0
    a, b = load_file(str(out / "model.safetensors")), load_file(str(straight / "model.safetensors"))
    assert a.keys() == b.keys()
    for name in a:  # weights and Adam moments were restored exactly: the same end point
        assert torch.allclose(a[name], b[name], atol=1e-6), name
