"""`dynrag train imitation` (stage I): supervised fine-tuning on synthesised trajectories.

    OUT/config.json, model.safetensors, tokenizer files   an HF directory: --model hf:OUT
    OUT/deeprag.json       marks it complete; how it was trained and how to prompt it (no worked examples)
    OUT/train_log.jsonl    one line per optimizer step (loss, tokens/s, lr, grad norm)
    OUT/loss.png           the loss curve
    OUT/checkpoint/        while training: the state a rerun resumes from (removed at the end)
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pydantic import Field
from rich.console import Console

from dynrag.deeprag.examples import imitation_example, narrative_style, training_narrative
from dynrag.deeprag.trajectory import Trajectory, read_trajectories, trajectory_file
from dynrag.errors import DataError
from dynrag.lm.loader import resolve_model
from dynrag.methods.deeprag.narrative import Narrative
from dynrag.run.jobs import JOBS, JobTraits, ModelGroup, OutputGroup
from dynrag.training.examples import TrainExample
from dynrag.training.supervised import already_trained, finish, train_masked, training_model
from dynrag.training.trainer import TrainOptions, schedule_meta


class ImitationJobOptions(ModelGroup, OutputGroup):
    """The `train imitation` job's options: the model to fine-tune, OUT, and what it learns from."""

    data: list[Path] = Field(description="synth output directories or trajectories.jsonl files")
    options: TrainOptions = Field(default_factory=TrainOptions, description="the training recipe")


def load_training_trajectories(paths: list[Path]) -> list[Trajectory]:
    trajectories: list[Trajectory] = []
    for path in paths:
        trajectories += read_trajectories(path)
    if not trajectories:
        raise DataError(", ".join(str(trajectory_file(p)) for p in paths), "no trajectories to train on")
    return trajectories


def build_examples(tokenizer: Any, trajectories: list[Trajectory], max_tokens: int,
                   narrative: Narrative | None = None) -> tuple[list[TrainExample], int]:
    """(examples no longer than max_tokens, how many were left out)."""
    examples = [imitation_example(tokenizer, t, narrative) for t in trajectories]
    kept = [ex for ex in examples if len(ex) <= max_tokens]
    return kept, len(examples) - len(kept)


def run_imitation(req: ImitationJobOptions, *, console: Console | None = None, progress: bool = True) -> dict[str, Any]:
    console = console or Console(stderr=True)
    options, out = req.options, Path(req.out)
    files = [trajectory_file(p) for p in req.data]
    trajectories = load_training_trajectories(files)  # bad data fails before the model loads
    style = narrative_style(trajectories, ", ".join(str(f) for f in files))
    if (finished := already_trained(out, console)) is not None:
        return finished
    with training_model(out, req.model, options, progress) as (model, tokenizer, source, options, device):
        examples, dropped = build_examples(tokenizer, trajectories, options.max_tokens, training_narrative(tokenizer, style))
        if not examples:
            raise DataError(str(files[0]), f"every trajectory is longer than --max-tokens {options.max_tokens}")
        if dropped:
            console.print(f"[yellow]left out {dropped} trajectories longer than {options.max_tokens} tokens[/yellow]")
        records, lr, steps = train_masked(
            model, tokenizer, examples, options, device, model_spec=req.model, out=out, identity={},
            headline=f"imitation: {len(examples)} trajectories", description="imitation", console=console,
            progress=progress,
        )
        meta = {
            "stage": "imitation",
            "base_model": resolve_model(req.model),
            "base_source": source,
            "data": [str(f) for f in files],
            "data_sha256": [hashlib.sha256(f.read_bytes()).hexdigest() for f in files],
            "examples": len(examples),
            "left_out_long": dropped,
            "lr": lr,
            "lr_schedule": schedule_meta(options, lr, steps),
        }
        return finish(model, tokenizer, out, options, records, meta, {"shots": 0, "style": style})


JOBS.add("train imitation", run_imitation, ImitationJobOptions,
         summary="stage I: supervised fine-tuning on the synthesised narratives",
         traits=JobTraits(lock="out", loop="own"))
