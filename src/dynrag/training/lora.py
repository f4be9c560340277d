"""LoRA written here, not taken from peft: adapters on chosen linear layers, merged into the base
weights before saving, so the output is a plain HF directory that loads without any adapter
library, and the checkpoint of a run is just the adapter tensors (safetensors) and their Adam state.

W x becomes W x + (alpha / r) * B (A x), with A (r x in) drawn like nn.Linear's weight and B
(out x r) zero, so training starts from the base model exactly.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Iterable, Iterator

import torch
from torch import nn

DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, rank: int, alpha: float):
        super().__init__()
        self.base = base
        self.scale = alpha / rank
        # The adapters are float32 whatever the base's precision (Adam on bf16 values loses the small
        # updates), initialised on the CPU (the same values on every device) and moved to the base's.
        a = torch.empty(rank, base.in_features, dtype=torch.float32)
        nn.init.kaiming_uniform_(a, a=math.sqrt(5))
        device = base.weight.device
        self.lora_a = nn.Parameter(a.to(device))
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank, dtype=torch.float32, device=device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        update = (x.to(self.lora_a.dtype) @ self.lora_a.t() @ self.lora_b.t()) * self.scale
        return self.base(x) + update.to(x.dtype)

    def merged(self) -> nn.Linear:
        with torch.no_grad():
            self.base.weight += ((self.lora_b @ self.lora_a) * self.scale).to(self.base.weight.dtype)
        return self.base


def add_lora(model: nn.Module, rank: int = 16, alpha: float = 32.0, targets: Iterable[str] = DEFAULT_TARGETS,
             seed: int = 0) -> dict[str, nn.Parameter]:
    """Freeze the model and wrap every linear layer named in `targets`; returns the adapter
    parameters by name (the only trainable ones)."""
    targets = set(targets)
    for p in model.parameters():
        p.requires_grad_(False)
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        wrapped = 0
        for parent in list(model.modules()):
            for name, child in list(parent.named_children()):
                if name in targets and isinstance(child, nn.Linear):
                    setattr(parent, name, LoRALinear(child, rank, alpha))
                    wrapped += 1
    finally:
        torch.random.set_rng_state(generator_state)
    if not wrapped:
        raise ValueError(f"no linear layer named {sorted(targets)} in the model")
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


def adapter_factors(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every adapter's factors by the wrapped layer's module path, alpha / r folded into ``lora_b``
    (the on-disk form of lm/adapter.py), copied off the model."""
    out: dict[str, torch.Tensor] = {}
    for path, module in model.named_modules():
        if isinstance(module, LoRALinear):
            out[f"{path}.lora_a"] = module.lora_a.detach().float().cpu().clone()
            out[f"{path}.lora_b"] = (module.lora_b.detach().float() * module.scale).cpu()
    return out


def merge_lora(model: nn.Module) -> nn.Module:
    """Fold every adapter into its base weight and put the plain linear layer back."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, LoRALinear):
                setattr(parent, name, child.merged())
    for p in model.parameters():
        p.requires_grad_(True)
    return model


@contextmanager
def lora_disabled(model: nn.Module) -> Iterator[nn.Module]:
    """The base model inside: every adapter's contribution off (GRPO's frozen reference when
    training LoRA: the model it started from, without a second copy in memory)."""
    adapters = [m for m in model.modules() if isinstance(m, LoRALinear)]
    scales = [m.scale for m in adapters]
    for m in adapters:
        m.scale = 0.0
    try:
        yield model
    finally:
        for m, scale in zip(adapters, scales):
            m.scale = scale
