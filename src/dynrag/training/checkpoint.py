"""Training state on disk in plain formats (no pickle): trainable weights, Adam moments and the
RNG as safetensors, the step and run identity as JSON, all in one directory swapped in atomically
(a kill mid-save leaves the previous checkpoint whole).

    OUT/checkpoint/trainable.safetensors   every trainable tensor by parameter name
    OUT/checkpoint/optimizer.safetensors   NAME::exp_avg, NAME::exp_avg_sq
    OUT/checkpoint/rng.safetensors         torch's CPU generator state
    OUT/checkpoint/state.json              step, Adam step counts, fingerprint of data and options
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from dynrag.errors import DataError
from dynrag.io.directories import atomic_directory
from dynrag.io.files import atomic_write_json, read_json

STATE_FORMAT = "dynrag-train-state/1"
CHECKPOINT_DIR = "checkpoint"


def save_state(directory: Path, step: int, params: dict[str, torch.nn.Parameter], optimizer: torch.optim.Optimizer,
               meta: dict[str, Any]) -> None:
    name_of = {id(p): n for n, p in params.items()}
    moments: dict[str, torch.Tensor] = {}
    adam_steps: dict[str, float] = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            state = optimizer.state.get(p)
            if not state:
                continue
            name = name_of[id(p)]
            moments[f"{name}::exp_avg"] = state["exp_avg"].detach().contiguous()
            moments[f"{name}::exp_avg_sq"] = state["exp_avg_sq"].detach().contiguous()
            adam_steps[name] = float(state["step"])
    with atomic_directory(directory) as tmp:
        save_file({n: p.detach().contiguous() for n, p in params.items()}, str(tmp / "trainable.safetensors"))
        save_file(moments, str(tmp / "optimizer.safetensors"))
        save_file({"torch_cpu": torch.get_rng_state()}, str(tmp / "rng.safetensors"))
        atomic_write_json(tmp / "state.json", {"format": STATE_FORMAT, "step": step, "adam_steps": adam_steps, **meta})


def read_state_meta(directory: Path) -> dict[str, Any] | None:
    path = Path(directory) / "state.json"
    if not path.exists():
        return None
    meta = read_json(path, "training state")
    if not isinstance(meta, dict) or meta.get("format") != STATE_FORMAT:
        raise DataError(str(path), f"not a training state of format {STATE_FORMAT!r}")
    return meta


def load_state(directory: Path, params: dict[str, torch.nn.Parameter], optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Restore weights, Adam moments and RNG saved by save_state; returns state.json."""
    directory = Path(directory)
    meta = read_state_meta(directory)
    if meta is None:
        raise DataError(str(directory), "no training state here")
    weights = load_file(str(directory / "trainable.safetensors"))
    missing = sorted(set(params) - set(weights))
    if missing:
        raise DataError(str(directory / "trainable.safetensors"), f"lacks {missing[0]!r}: saved from another model or method")
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(weights[name])
    moments = load_file(str(directory / "optimizer.safetensors"))
    for name, p in params.items():
        if name in meta["adam_steps"]:
            optimizer.state[p] = {
                "step": torch.tensor(meta["adam_steps"][name], dtype=torch.float32),
                "exp_avg": moments[f"{name}::exp_avg"].clone(),
                "exp_avg_sq": moments[f"{name}::exp_avg_sq"].clone(),
            }
    torch.set_rng_state(load_file(str(directory / "rng.safetensors"))["torch_cpu"])
    return meta
