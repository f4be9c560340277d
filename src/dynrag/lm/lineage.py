"""Where a dynrag-trained checkpoint came from: the metadata file `dynrag train` writes beside its
weights, and the base model a chain of fine-tunes started from. A model is its own base unless its
directory says otherwise, so a comparison of "the same base model" works for any spec."""

from __future__ import annotations

import json
from pathlib import Path

from dynrag.errors import ConfigError
from dynrag.lm.spec import ModelSpec

# The file a trained checkpoint carries (written by `dynrag train`); its "prompt" says how it was
# trained to be prompted, so `--model hf:DIR --method deeprag` needs no options.
CHECKPOINT_META = "deeprag.json"


def checkpoint_meta(model_name: str) -> dict | None:
    """deeprag.json of a dynrag-trained checkpoint (`hf:DIR` holding one), else None."""
    try:
        spec = ModelSpec.parse(model_name)
    except ConfigError:  # a test double's or a server's own name
        return None
    if spec.kind != "hf":
        return None
    meta = Path(spec.target) / CHECKPOINT_META
    try:
        data = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def base_model(model_name: str) -> str:
    """The model a dynrag-trained checkpoint was trained from, followed back through both stages
    (stage II names the stage-I checkpoint); any other model is its own base. Model options
    (`?device=...`) are dropped and a local directory is named by its absolute path."""
    seen = set()
    while model_name not in seen:
        seen.add(model_name)
        parent = (checkpoint_meta(model_name) or {}).get("base_model")
        if not isinstance(parent, str) or not parent:
            break
        model_name = parent
    try:
        spec = ModelSpec.parse(model_name)
    except ConfigError:
        return model_name
    if spec.kind == "hf" and Path(spec.target).is_dir():
        return ModelSpec.for_path(Path(spec.target).resolve(), spec.file).base
    return spec.base
