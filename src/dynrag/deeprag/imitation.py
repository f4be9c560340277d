"""`dynrag train imitation` (stage I): supervised fine-tuning on synthesised trajectories.

    OUT/config.json, model.safetensors, tokenizer files   an HF directory: --model hf:OUT
    OUT/deeprag.json       marks it complete; how it was trained and how to prompt it (no worked examples)
    OUT/train_log.jsonl    one line per optimizer step (loss, tokens/s, lr, grad norm)
    OUT/loss.png           the loss curve
    OUT/checkpoint/        while training: the state a rerun resumes from (removed at the end)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from dynrag.deeprag.examples import TrainExample, examples_fingerprint, imitation_example
from dynrag.deeprag.losses import collate, imitation_loss
from dynrag.deeprag.lora import add_lora, merge_lora
from dynrag.deeprag.models import is_complete, load_trainable, read_meta, save_model_dir
from dynrag.deeprag.plot import plot_loss
from dynrag.deeprag.trainer import (
    TRAIN_LOG,
    StepFn,
    TrainOptions,
    drop_checkpoint,
    identity_options,
    model_device,
    pin_threads,
    describe_schedule,
    plan_batches,
    schedule_meta,
    settle_method,
    train_loop,
)
from dynrag.deeprag.trajectory import Trajectory, read_trajectories, trajectory_file
from dynrag.errors import DataError
from dynrag.lm.device import autocast
from dynrag.lm.loader import resolve_model
from dynrag.io.jsonl import read_jsonl
from dynrag.io.lock import DirectoryLock

# The authors fine-tune fully at 1e-5 for one epoch (8B models, 8,000 trajectories); LoRA's
# usual rate is about ten times higher.
DEFAULT_LR = {"full": 1e-5, "lora": 2e-4}


@dataclass
class ImitationRequest:
    data: list[Path]
    out: Path
    model: str = "bundled"
    options: TrainOptions = field(default_factory=TrainOptions)


def load_training_trajectories(paths: list[Path]) -> list[Trajectory]:
    trajectories: list[Trajectory] = []
    for path in paths:
        trajectories += read_trajectories(path)
    if not trajectories:
        raise DataError(", ".join(str(trajectory_file(p)) for p in paths), "no trajectories to train on")
    return trajectories


def build_examples(tokenizer: Any, trajectories: list[Trajectory], max_tokens: int) -> tuple[list[TrainExample], int]:
    """(examples no longer than max_tokens, how many were left out)."""
    examples = [imitation_example(tokenizer, t) for t in trajectories]
    kept = [ex for ex in examples if len(ex) <= max_tokens]
    return kept, len(examples) - len(kept)


def attach_method(model: Any, options: TrainOptions) -> dict[str, Any]:
    """The parameters to train: all of them, or LoRA adapters (the base frozen)."""
    if options.method == "lora":
        return add_lora(model, options.lora_rank, options.lora_alpha, seed=options.seed)
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


def already_trained(out: Path, console: Console) -> dict[str, Any] | None:
    """deeprag.json of a finished checkpoint in OUT (said on the console), else None."""
    if not is_complete(out):
        return None
    console.print(f"{out} already holds a finished checkpoint; nothing to do (use another --out to train again)")
    return read_meta(out)


@contextmanager
def training_model(out: Path, spec: str, options: TrainOptions,
                   progress: bool) -> Iterator[tuple[Any, Any, str, TrainOptions, Any]]:
    """(model, tokenizer, source, options with the method settled, device), with OUT held by
    this process for the whole run."""
    pin_threads(options)
    with DirectoryLock(out, "training directory"):
        model, tokenizer, source = load_trainable(spec, progress=progress)
        options = settle_method(options, model)
        yield model, tokenizer, source, options, model_device(model)


def planned_batches(examples: list[TrainExample], options: TrainOptions) -> list[list[int]]:
    """Example indices per optimizer step: the seeded plan, cut at max_steps."""
    batches = plan_batches([len(ex) for ex in examples], options.batch_size, options.epochs, options.seed)
    return batches[: options.max_steps] if options.max_steps else batches


def masked_lm_step(model: Any, tokenizer: Any, examples: list[TrainExample], device: Any) -> StepFn:
    """Forward and backward of the masked cross-entropy on one batch of examples (the labelled
    tokens only), for the trainer's loop."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def step(batch: list[int]) -> dict[str, float]:
        ids, mask, labels = (t.to(device) for t in collate([examples[i] for i in batch], pad))
        with autocast(str(device)):  # bf16 on CUDA; a no-op on the CPU
            loss, learned = imitation_loss(model, ids, mask, labels)
        loss.backward()
        return {"loss": loss.item(), "tokens": float(mask.sum()), "learned_tokens": float(learned)}

    return step


def finish(model: Any, tokenizer: Any, out: Path, options: TrainOptions, records: list[dict[str, Any]],
           meta: dict[str, Any], prompt: dict[str, Any] | None = None) -> dict[str, Any]:
    """Merge adapters, write the HF directory with deeprag.json (``prompt``: how it was prompted in
    training; default no worked examples), the loss curve, and drop the checkpoint."""
    if options.method == "lora":
        merge_lora(model)
    model.eval()
    tokens = sum(r.get("tokens", 0) for r in records)
    seconds = sum(r["seconds"] for r in records)
    report = {
        **meta,
        "method": options.method,
        "options": options.model_dump(),
        "steps": len(records),
        "first_loss": records[0]["loss"] if records else None,
        "final_loss": records[-1]["loss"] if records else None,
        "tokens_per_second": round(tokens / seconds, 2) if seconds and tokens else None,
        "prompt": prompt if prompt is not None else {"shots": 0},
    }
    save_model_dir(model, tokenizer, out, report)
    plot_loss(records, out / "loss.png", f"{meta['stage']} ({options.method}, {meta['base_model']})")
    drop_checkpoint(out)
    return report


def train_masked(model: Any, tokenizer: Any, examples: list[TrainExample], options: TrainOptions, device: Any, *,
                 model_spec: str, out: Path, identity: dict[str, Any], headline: str, description: str,
                 console: Console, progress: bool) -> tuple[list[dict[str, Any]], float, int]:
    """The supervised run `train imitation` and `train reader` share: batches planned, LoRA or the
    full model made trainable, the masked LM loss through the shared loop. ``identity`` adds to
    what a resumed run must match (data, base model, options). Returns (log records, lr, steps)."""
    batches = planned_batches(examples, options)
    params = attach_method(model, options)
    lr = options.lr or DEFAULT_LR[options.method]
    step = masked_lm_step(model, tokenizer, examples, device)
    identity = {"data": examples_fingerprint(examples), "model": resolve_model(model_spec),
                "options": identity_options(options), **identity}
    console.print(f"{headline}, {len(batches)} steps, {options.method} fine-tune, "
                  f"{describe_schedule(options, lr, len(batches))}")
    records = train_loop(params=params, batches=batches, step_fn=step, options=options, lr=lr, out=out,
                         identity=identity, console=console, progress=progress, description=description)
    return records, lr, len(batches)


def run_imitation(req: ImitationRequest, *, console: Console | None = None, progress: bool = True) -> dict[str, Any]:
    console = console or Console(stderr=True)
    options, out = req.options, Path(req.out)
    files = [trajectory_file(p) for p in req.data]
    trajectories = load_training_trajectories(files)  # bad data fails before the model loads
    if (finished := already_trained(out, console)) is not None:
        return finished
    with training_model(out, req.model, options, progress) as (model, tokenizer, source, options, device):
        examples, dropped = build_examples(tokenizer, trajectories, options.max_tokens)
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
        return finish(model, tokenizer, out, options, records, meta)


def read_log(out: Path) -> list[dict[str, Any]]:
    return read_jsonl(Path(out) / TRAIN_LOG)
