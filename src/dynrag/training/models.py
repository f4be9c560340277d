"""Loading a model to train, and writing the trained one as an HF directory (`--model hf:DIR`).

transformers flags a GGUF-loaded model as quantised: the Trainer refuses to fine-tune it and
`save_pretrained` refuses to write it. Training therefore always loads plain float32 weights: the
dequantised safetensors copy `lm.loader.model_directory` points to for bundled and GGUF specs,
and any model that still carries a quantiser is rebuilt from its config with its weights.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from dynrag.errors import ConfigError, DynragError, json_error
from dynrag.io.files import atomic_write_json, fsync_dir
from dynrag.lm.lineage import CHECKPOINT_META

CHECKPOINT_FORMAT = "dynrag-deeprag-checkpoint/1"


def plain_model(model: Any) -> Any:
    """The model itself, or, when transformers marks it quantised, a rebuild from its config with
    the same (dequantised) weights that can be trained and saved."""
    if not (getattr(model, "hf_quantizer", None) is not None or getattr(model, "is_quantized", False)):
        return model
    from transformers import AutoModelForCausalLM

    config = model.config
    if hasattr(config, "quantization_config"):
        config = type(config).from_dict({k: v for k, v in config.to_dict().items() if k != "quantization_config"})
    # Built on the CPU, not the meta device: buffers outside the state dict (rotary frequencies)
    # must be real tensors.
    rebuilt = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    rebuilt.load_state_dict({k: v.detach().to(torch.float32) for k, v in model.state_dict().items()})
    rebuilt.tie_weights()
    return rebuilt


def load_trainable(spec: str, progress: bool = True) -> tuple[Any, Any, str]:
    """(model in train mode, tokenizer, where it came from) for a model spec."""
    from dynrag.lm.loader import load_pretrained, model_directory

    from dynrag.lm.spec import ModelSpec

    parsed = ModelSpec.parse(spec)
    if parsed.is_http:
        raise ConfigError(f"--model {spec!r}: a model behind an HTTP server cannot be trained; pass local weights")
    source = model_directory(parsed, progress=progress)
    # The spec's device= and dtype= apply (bf16 on a GPU by default); float32 on a CPU as before.
    model, tokenizer = load_pretrained(source, f"{spec!r} for training", parsed.options, spec=parsed.base)
    return plain_model(model).train(), tokenizer, str(source)


def is_complete(out: Path) -> bool:
    """True when OUT holds a finished checkpoint written by `dynrag train`."""
    try:
        meta = json.loads((Path(out) / CHECKPOINT_META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("complete") is True


def save_model_dir(model: Any, tokenizer: Any, out: Path, meta: dict[str, Any]) -> None:
    """Write the model (safetensors), its tokenizer and deeprag.json into OUT.

    The files are written to a scratch folder inside OUT and renamed into place; deeprag.json,
    which marks the checkpoint complete, goes last, so a kill before it means "not finished" and
    the next run writes the model again.
    """
    out = Path(out)
    scratch = out / ".model-build"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        model.save_pretrained(scratch, safe_serialization=True)
        tokenizer.save_pretrained(scratch)
        for item in scratch.iterdir():
            with open(item, "rb") as f:
                os.fsync(f.fileno())
            os.replace(item, out / item.name)
        fsync_dir(out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    atomic_write_json(out / CHECKPOINT_META, {"format": CHECKPOINT_FORMAT, "complete": True, **meta})


def read_meta(out: Path) -> dict[str, Any]:
    """deeprag.json of a finished checkpoint."""
    path = Path(out) / CHECKPOINT_META
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DynragError(f"{path}: unreadable checkpoint description ({exc})") from exc
    except ValueError as exc:  # not JSON, or not UTF-8
        raise json_error(path, exc) from exc
