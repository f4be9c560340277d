"""Will a training run fit? An estimate made once the model is loaded, before the first step, so a
run that cannot fit stops with a figure instead of being killed by the OOM killer mid-epoch.

A full fine-tune holds, per parameter, the weight, its gradient and AdamW's two moments: four
numbers of the weights' size. LoRA trains a few adapter matrices and keeps the base frozen: about
one number per parameter. Activations, the adapters and working copies take a share on top,
which depends on the batch and the sequence length; a quarter of the total is allowed for them.
"""

from __future__ import annotations

from typing import Any

from dynrag.errors import ConfigError
from dynrag.training.finetune import FineTune

NUMBERS_PER_PARAMETER = {FineTune.FULL: 4, FineTune.LORA: 1}
ACTIVATION_SHARE = 0.25
GIB = 1024**3


def training_bytes(parameters: int, method: str, element_bytes: int) -> int:
    """Bytes a run of ``method`` needs for a model of ``parameters`` stored in ``element_bytes``."""
    return int(parameters * NUMBERS_PER_PARAMETER[method] * element_bytes * (1 + ACTIVATION_SHARE))


def available_bytes(model: Any) -> int | None:
    """Memory the run may use: what the device has free, plus what the loaded weights already
    hold (they are part of the estimate). None where it cannot be read."""
    import torch

    parameters = list(model.parameters())
    held = sum(p.numel() * p.element_size() for p in parameters)
    device = parameters[0].device if parameters else torch.device("cpu")
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0]) + held
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 + held
    except OSError:
        return None
    return None


def check_fits(model: Any, method: str, available: int | None) -> None:
    """Refuse, in one line with the estimate, a run that needs more than ``available`` bytes."""
    if available is None:
        return
    parameters = list(model.parameters())
    count = sum(p.numel() for p in parameters)
    element = parameters[0].element_size() if parameters else 4
    need = training_bytes(count, method, element)
    if need <= available:
        return
    what = "weight, gradient and two AdamW moments" if method == FineTune.FULL else "frozen weight"
    advice = "use --option method=lora or a smaller model" if method == FineTune.FULL else "use a smaller model"
    raise ConfigError(
        f"training with method={method} needs about {need / GIB:.1f} GiB ({count / 1e9:.2f}B parameters x "
        f"{NUMBERS_PER_PARAMETER[method]} numbers of {element} bytes ({what}), plus a quarter for activations); "
        f"about {available / GIB:.1f} GiB is available: {advice}")
