"""The learning-rate schedule: the pure function against hand-computed values, the warm-up count,
the defaults of both stages, and a resumed run continuing on the curve it started."""

import json

import pytest
import torch
from rich.console import Console

from dynrag.deeprag.calibration import CalibrationJobOptions, CalibrationOptions
from dynrag.deeprag.synth import SynthJobOptions
from dynrag.deeprag.train_cli import train_options
from dynrag.training.trainer import TRAIN_LOG, TrainOptions, learning_rate, train_loop, warmup_of
from dynrag.errors import ConfigError


def test_warm_up_then_cosine_to_zero_at_the_last_step():
    # 6 steps, 2 of warm-up: 1/2, 2/2, then base * (1 + cos(pi * i / 3)) / 2 for i = 0..3
    assert [learning_rate(s, 1.0, 2, 6, "cosine") for s in range(6)] == pytest.approx([0.5, 1.0, 1.0, 0.75, 0.25, 0.0])
    # 10 steps, 1 of warm-up, base 2e-5: the cosine runs over steps 1..9, 8 intervals; step 5 is half-way
    rates = [learning_rate(s, 2e-5, 1, 10, "cosine") for s in range(10)]
    assert rates[0] == rates[1] == 2e-5 and rates[5] == pytest.approx(1e-5) and rates[9] == pytest.approx(0.0, abs=1e-20)
    assert rates[3] == pytest.approx(2e-5 * (1 + 0.5 ** 0.5) / 2)  # a quarter of the way: cos(pi/4)
    assert all(a >= b for a, b in zip(rates, rates[1:]))


def test_constant_schedule_and_degenerate_lengths():
    assert [learning_rate(s, 1.0, 4, 10, "constant") for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert [learning_rate(s, 3.0, 0, 3, "constant") for s in range(3)] == [3.0, 3.0, 3.0]
    assert learning_rate(0, 1.0, 0, 1, "cosine") == 1.0  # one step: nothing to decay over
    assert [learning_rate(s, 1.0, 1, 2, "cosine") for s in range(2)] == [1.0, 1.0]  # all warm-up, then the peak


def test_warm_up_steps_are_the_ratio_rounded_up_unless_given():
    assert warmup_of(TrainOptions(), 100) == 10
    assert warmup_of(TrainOptions(), 4) == 1  # 0.4 rounds up: the first step never runs at the full rate
    assert warmup_of(TrainOptions(warmup_ratio=0.0), 50) == 0
    assert warmup_of(TrainOptions(warmup_ratio=0.25), 8) == 2
    assert warmup_of(TrainOptions(warmup_ratio=0.07), 100) == 7  # not 8: 0.07 * 100 is 7.000000000000001 in floating point
    assert warmup_of(TrainOptions(warmup_steps=3, warmup_ratio=0.5), 100) == 3


def test_the_authors_recipe_is_the_default_of_both_stages():
    imitation, calibration = train_options([]), train_options([], "calibration")
    assert (imitation.schedule, imitation.warmup_ratio, imitation.epochs) == ("cosine", 0.1, 1)
    assert (calibration.schedule, calibration.warmup_ratio, calibration.epochs) == ("cosine", 0.1, 8)
    search = SynthJobOptions(dataset="hotpotqa", data="q.json", out="o/synth")
    assert isinstance(CalibrationJobOptions(synth=search, out="o").options, CalibrationOptions)
    assert train_options([], "calibration", epochs=2, schedule="constant").epochs == 2
    with pytest.raises(ConfigError, match="option 'schedule': must be 'constant' or 'cosine' \\(got 'linear'\\)"):
        train_options([], schedule="linear")
    with pytest.raises(ConfigError, match="option 'warmup_ratio'"):
        train_options(["warmup_ratio=1"])


class Interrupted(Exception):
    pass


def run_loop(out, options, steps=12, stop_at=None):
    torch.manual_seed(0)
    weight = torch.nn.Parameter(torch.ones(3))
    target = torch.tensor([0.5, -1.0, 2.0])

    def step(batch):
        if stop_at is not None and batch[0] == stop_at:
            raise Interrupted  # dies mid-run, after the checkpoint before it
        loss = ((weight - target) ** 2).sum()
        loss.backward()
        return {"loss": loss.item()}

    train_loop(params={"w": weight}, batches=[[i] for i in range(steps)], step_fn=step, options=options, lr=0.1,
               out=out, identity={"data": "x"}, console=Console(stderr=True, quiet=True), progress=False)
    return weight.detach().clone()


def test_a_resumed_run_continues_the_same_curve(tmp_path):
    options = TrainOptions(save_every=4, warmup_ratio=0.25)
    with pytest.raises(Interrupted):
        run_loop(tmp_path / "cut", options, stop_at=9)
    state = json.loads((tmp_path / "cut" / "checkpoint" / "state.json").read_text())
    assert state["step"] == 8
    assert state["lr_schedule"] == {"schedule": "cosine", "lr": 0.1, "warmup_steps": 3, "total_steps": 12}
    resumed = run_loop(tmp_path / "cut", options)
    straight = run_loop(tmp_path / "straight", options)
    log = [json.loads(line) for line in (tmp_path / "cut" / TRAIN_LOG).read_text().splitlines()]
    plain = [json.loads(line) for line in (tmp_path / "straight" / TRAIN_LOG).read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 13))
    assert [r["lr"] for r in log] == [r["lr"] for r in plain] == [learning_rate(s, 0.1, 3, 12) for s in range(12)]
    assert log[-1]["lr"] == 0.0 and torch.equal(resumed, straight)


def test_resuming_on_another_curve_is_refused(tmp_path):
    with pytest.raises(Interrupted):
        run_loop(tmp_path / "cut", TrainOptions(save_every=4), stop_at=6)
    with pytest.raises(ConfigError, match="step count"):
        run_loop(tmp_path / "cut", TrainOptions(save_every=4), steps=20)  # a longer run: another cosine
    state = tmp_path / "cut" / "checkpoint" / "state.json"
    meta = json.loads(state.read_text())
    meta["lr_schedule"]["warmup_steps"] = 5
    state.write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match="learning-rate warmup_steps"):
        run_loop(tmp_path / "cut", TrainOptions(save_every=4))
