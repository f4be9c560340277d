"""The memory estimate of a training run, and the refusal of one that cannot fit."""

import pytest
import torch

from dynrag.errors import ConfigError
from dynrag.training.memory import GIB, available_bytes, check_fits, training_bytes
from dynrag.training.trainer import TrainOptions, settle_method


def test_bytes_per_parameter_by_hand():
    # full: weight, gradient and two AdamW moments, fp32, plus a quarter: 1e9 x 4 x 4 x 1.25
    assert training_bytes(1_000_000_000, "full", 4) == 20_000_000_000
    # LoRA: the frozen weights only, plus a quarter: 1.5e9 x 1 x 4 x 1.25
    assert training_bytes(1_500_000_000, "lora", 4) == 7_500_000_000
    assert training_bytes(1_000_000_000, "full", 2) == 10_000_000_000  # bf16


def model():
    return torch.nn.Linear(1000, 1000)  # 1,001,000 fp32 parameters


def test_a_full_run_that_cannot_fit_is_refused_with_its_estimate_and_lora_suggested():
    need_full = training_bytes(1_001_000, "full", 4)  # 20,020,000 bytes
    with pytest.raises(ConfigError) as refused:
        check_fits(model(), "full", need_full - 1)
    message = str(refused.value)
    assert "\n" not in message
    assert "method=full needs about 0.0 GiB (0.00B parameters x 4 numbers of 4 bytes" in message
    assert "use --option method=lora" in message
    check_fits(model(), "full", need_full)  # exactly enough
    check_fits(model(), "lora", need_full // 4)  # LoRA needs a quarter of it
    check_fits(model(), "full", None)  # memory unknown: no verdict


def test_settle_method_checks_the_settled_method():
    with pytest.raises(ConfigError, match="method=full needs"):
        settle_method(TrainOptions(), model(), available=1000)
    assert settle_method(TrainOptions(), model(), available=GIB).method == "full"


def test_this_machine_has_some_memory_beyond_the_loaded_weights():
    m = model()
    assert available_bytes(m) > 1_001_000 * 4
