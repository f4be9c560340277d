"""The adapter a LoRA training run leaves beside its merged weights (lm/adapter.py's format), so
the run can be shared as megabytes rather than a whole model.

A run whose starting model is itself base + adapter (stage II over a LoRA stage I) writes the two
adapters stacked into one over the first base, so its adapter applies to the weights a user
already has, such as the bundled ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import torch

from dynrag.lm.adapter import adapter_behind, portable_base, read_adapter_meta, stack, write_adapter
from dynrag.lm.lineage import CHECKPOINT_META
from dynrag.training.models import CHECKPOINT_FORMAT


def write_run_adapter(factors: Mapping[str, torch.Tensor], out: Path, report: Mapping[str, Any]) -> Path:
    """Write ``factors`` (trained over ``report['base_model']``) as an adapter at ``out``, with the
    run's deeprag.json beside it so `--model hf:OUT` is prompted as the merged checkpoint is."""
    trained_from = str(report["base_model"])
    parent = adapter_behind(trained_from)
    stage = str(report.get("stage", "train"))
    if parent is not None:
        stages = list(read_adapter_meta(parent.directory).get("stages") or ["earlier"]) + [stage]
        factors, base = stack(parent.factors, factors), parent.base
    else:
        stages, base = [stage], portable_base(trained_from)
    about = {"trained_from": trained_from, "stages": stages}
    checkpoint = {"format": CHECKPOINT_FORMAT, "complete": True, **report}
    return write_adapter(out, dict(factors), base, about=about, files={CHECKPOINT_META: checkpoint})
