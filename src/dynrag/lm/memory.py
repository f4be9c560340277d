"""Will the model fit? Its memory from config.json alone, checked against free memory before loading.

    weights  = parameters x bytes per parameter of the dtype
    KV cache = 2 (keys, values) x layers x kv_heads x head_dim x tokens x bytes

Parameters are counted from the config of a decoder (embeddings, per layer the attention
projections, a gated or plain MLP and two norms, the final norm, the LM head unless tied); a
config without those fields falls back on the safetensors index's ``total_size``. Tokens: one
sequence as long as the context window, capped at ``DEFAULT_CONTEXT_TOKENS`` (what one DRAGIN or
DeepRAG prompt with its documents and output needs). A model that cannot fit is refused in one
line before a weight is read, instead of an out-of-memory crash halfway through a run.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from dynrag.errors import ConfigError

DEFAULT_CONTEXT_TOKENS = 4096
GB = 1e9
_STORED_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int8": 1}


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """A multimodal config keeps the language model's fields under text_config."""
    inner = config.get("text_config")
    return inner if isinstance(inner, Mapping) and "hidden_size" in inner else config


def parameter_count(config: Mapping[str, Any]) -> int | None:
    """Parameters of a decoder-only transformer from its config; None when the fields are missing."""
    c = _text_config(config)
    try:
        hidden, layers, vocab = int(c["hidden_size"]), int(c["num_hidden_layers"]), int(c["vocab_size"])
    except (KeyError, TypeError, ValueError):
        return None
    heads = int(c.get("num_attention_heads") or 1)
    kv_heads = int(c.get("num_key_value_heads") or heads)
    head_dim = int(c.get("head_dim") or hidden // heads)
    intermediate = int(c.get("intermediate_size") or 4 * hidden)
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2  # q, o; k, v
    gated = c.get("hidden_act", "silu") in ("silu", "swish", "gelu_pytorch_tanh") or "llama" in str(c.get("model_type", ""))
    mlp = (3 if gated else 2) * hidden * intermediate
    per_layer = attention + mlp + 2 * hidden
    tied = bool(c.get("tie_word_embeddings", config.get("tie_word_embeddings", False)))
    return vocab * hidden * (1 if tied else 2) + layers * per_layer + hidden


def kv_cache_bytes(config: Mapping[str, Any], tokens: int, bytes_per_value: int) -> int:
    """2 x layers x kv_heads x head_dim x tokens x bytes."""
    c = _text_config(config)
    hidden, layers = int(c.get("hidden_size", 0)), int(c.get("num_hidden_layers", 0))
    heads = int(c.get("num_attention_heads") or 1)
    kv_heads = int(c.get("num_key_value_heads") or heads)
    head_dim = int(c.get("head_dim") or (hidden // heads if heads else 0))
    return 2 * layers * kv_heads * head_dim * tokens * bytes_per_value


def context_tokens(config: Mapping[str, Any], cap: int = DEFAULT_CONTEXT_TOKENS) -> int:
    c = _text_config(config)
    window = c.get("max_position_embeddings") or c.get("n_positions") or cap
    return min(int(window), cap)


@dataclass(frozen=True)
class MemoryNeed:
    weights: int  # bytes
    cache: int  # bytes

    @property
    def total(self) -> int:
        return self.weights + self.cache


def memory_need(config: Mapping[str, Any], bytes_per_parameter: int, index_total_size: int | None = None,
                tokens: int | None = None) -> MemoryNeed | None:
    """Weights and one context window's KV cache in bytes; None when neither the config nor the
    index says how large the model is."""
    params = parameter_count(config)
    if params is None and index_total_size:
        stored = _STORED_BYTES.get(str(config.get("torch_dtype") or config.get("dtype") or "float32"), 4)
        params = index_total_size // stored
    if params is None:
        return None
    tokens = context_tokens(config) if tokens is None else tokens
    return MemoryNeed(params * bytes_per_parameter, kv_cache_bytes(config, tokens, bytes_per_parameter))


def read_need(directory: Path, bytes_per_parameter: int) -> MemoryNeed | None:
    """``memory_need`` of a model directory (config.json and, if present, the safetensors index)."""
    try:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    total = None
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        try:
            total = int(json.loads(index.read_text(encoding="utf-8"))["metadata"]["total_size"])
        except (OSError, ValueError, KeyError, TypeError):
            total = None
    return memory_need(config, bytes_per_parameter, total) if isinstance(config, dict) else None


def ram_available() -> int:
    """Bytes of RAM available now: psutil where installed, else /proc/meminfo's MemAvailable."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def free_memory(device: str, device_map: str = "") -> tuple[int, str]:
    """(free bytes, where) for a placement: a CUDA device's free memory, every GPU's plus RAM
    under ``device_map=auto``, else the RAM."""
    import torch

    if device_map == "auto" and torch.cuda.is_available():
        gpus = sum(torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count()))
        return gpus + ram_available(), f"{torch.cuda.device_count()} GPU(s) and RAM"
    if device.startswith("cuda"):
        return int(torch.cuda.mem_get_info(torch.device(device))[0]), device
    return ram_available(), "this machine's RAM" if device == "cpu" else device


def refusal(label: str, dtype: str, need: MemoryNeed, free: int, where: str) -> str | None:
    """The one-line refusal when ``need`` exceeds ``free``, else None."""
    if need.total <= free:
        return None
    return (f"{label} in {dtype} needs ~{need.weights / GB:.1f} GB + {need.cache / GB:.1f} GB cache; "
            f"{where} has {free / GB:.1f} GB free; try device_map=auto, dtype=bfloat16 (or float16), "
            "a smaller model, or an openai: server")


def check_fits(directory: Path, label: str, device: str, dtype: str, bytes_per_parameter: int,
               device_map: str = "") -> None:
    """Refuse, before any weight is read, a model that cannot fit where it is to load.
    ``DYNRAG_SKIP_MEMORY_CHECK=1`` skips it (a machine whose free memory reads wrong)."""
    if os.environ.get("DYNRAG_SKIP_MEMORY_CHECK", "") == "1":
        return
    need = read_need(directory, bytes_per_parameter)
    if need is None:
        return
    free, where = free_memory(device, device_map)
    line = refusal(label, dtype, need, free, where)
    if line is not None:
        raise ConfigError(line)
