"""Where a local model runs and in what precision: the `device=` and `dtype=` model options resolved.

``auto`` (the default of both) keeps today's behaviour where no accelerator is present: the CPU
in float32. Where CUDA is present it means the first CUDA device in bfloat16 (half the memory of
float32, the precision the papers' models were trained in). Entropies and log-probabilities are
always computed in float32 from the logits, whatever the weights' precision (lm/hf.py).

The CUDA and MPS branches are written to the library's documented calls but have not been run
on such hardware by this project's tests; the CPU branches (float32 and bfloat16) are tested.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from dynrag.errors import ConfigError

DeviceName = str  # auto | cpu | cuda | cuda:N | mps (checked by ``check_device``)
DtypeName = Literal["auto", "float32", "bfloat16", "float16"]
DEVICE_FORMS = "auto, cpu, cuda, cuda:N, mps"
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


def check_device(value: str) -> str:
    """The device option as written, or a one-line error naming the valid forms."""
    text = value.strip().lower()
    if not _DEVICE.match(text):
        raise ValueError(f"device {value!r}: choose one of {DEVICE_FORMS}")
    return text


@dataclass(frozen=True)
class Placement:
    """A resolved device (``cpu``, ``cuda:0``, ``mps``) and dtype name (``float32``...)."""

    device: str
    dtype: str

    @property
    def torch_dtype(self):
        import torch

        return getattr(torch, self.dtype)

    @property
    def bytes_per_parameter(self) -> int:
        return DTYPE_BYTES[self.dtype]


def cuda_count() -> int:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def mps_available() -> bool:
    import torch

    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def resolve_placement(device: str = "auto", dtype: str = "auto", cuda_devices: int | None = None,
                      mps: bool | None = None, spec: str = "model") -> Placement:
    """``device``/``dtype`` options -> a concrete placement. ``auto``: ``cuda:0`` in bfloat16 where
    CUDA is present, else ``cpu`` in float32. A named CUDA device that is not there is an error
    naming the spec and how many there are. ``cuda_devices``/``mps`` default to what torch sees
    (tests pass them)."""
    count = cuda_count() if cuda_devices is None else cuda_devices
    device = check_device(device)
    if device == "auto":
        device = "cuda:0" if count else "cpu"
    elif device == "cuda":
        device = "cuda:0"
    if device.startswith("cuda"):
        index = int(device.partition(":")[2])
        if index >= count:
            raise ConfigError(
                f"model spec {spec!r}: device {device} asked for, but this machine has "
                + (f"{count} CUDA device(s) (cuda:0..cuda:{count - 1})" if count else "no CUDA device")
                + "; use device=auto or device=cpu"
            )
    if device == "mps" and not (mps_available() if mps is None else mps):
        raise ConfigError(f"model spec {spec!r}: device mps asked for, but torch sees no MPS backend; use device=cpu")
    if dtype == "auto":
        dtype = "bfloat16" if device.startswith("cuda") else "float32"
    return Placement(device, dtype)


def autocast(device: str):
    """bf16 autocast on a CUDA device (training), a no-op context elsewhere."""
    import contextlib

    import torch

    if str(device).startswith("cuda"):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
