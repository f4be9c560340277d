"""device= and dtype= resolved (lm/device.py): auto follows what the machine has."""

import pytest

from dynrag.errors import ConfigError
from dynrag.lm.device import Placement, resolve_placement


@pytest.mark.parametrize("device, dtype, gpus, expected", [
    ("auto", "auto", 0, Placement("cpu", "float32")),  # today's behaviour without a GPU
    ("auto", "auto", 2, Placement("cuda:0", "bfloat16")),
    ("cuda", "auto", 1, Placement("cuda:0", "bfloat16")),
    ("cuda:1", "float16", 2, Placement("cuda:1", "float16")),
    ("cpu", "bfloat16", 1, Placement("cpu", "bfloat16")),
    ("cpu", "auto", 1, Placement("cpu", "float32")),
])
def test_placement(device, dtype, gpus, expected):
    assert resolve_placement(device, dtype, cuda_devices=gpus) == expected


def test_a_missing_cuda_device_is_one_line_naming_the_spec():
    with pytest.raises(ConfigError, match=r"model spec 'hf:x': device cuda:2 asked for, but this machine has 2 CUDA device\(s\)"):
        resolve_placement("cuda:2", cuda_devices=2, spec="hf:x")
    with pytest.raises(ConfigError, match="no CUDA device"):
        resolve_placement("cuda", cuda_devices=0)
    with pytest.raises(ConfigError, match="no MPS backend"):
        resolve_placement("mps", mps=False)


def test_bytes_per_parameter():
    assert Placement("cpu", "float32").bytes_per_parameter == 4
    assert Placement("cuda:0", "bfloat16").bytes_per_parameter == 2
