"""Supervised fine-tuning shared by `train imitation` and `train reader`: the model made trainable
(all of it, or LoRA adapters), the masked LM loss on the labelled tokens through the trainer's
loop, and the finished HF directory with its metadata and loss curve."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console

from dynrag.io.lock import DirectoryLock
from dynrag.lm.adapter import ADAPTER_SUBDIR
from dynrag.lm.device import autocast
from dynrag.lm.loader import resolve_model
from dynrag.training.examples import TrainExample, examples_fingerprint
from dynrag.training.finetune import FineTune
from dynrag.training.losses import collate, imitation_loss
from dynrag.training.adapters import write_run_adapter
from dynrag.training.lora import adapter_factors, add_lora, merge_lora
from dynrag.training.models import is_complete, load_trainable, read_meta, save_model_dir
from dynrag.training.plot import plot_loss
from dynrag.training.trainer import (
    StepFn,
    TrainOptions,
    describe_schedule,
    drop_checkpoint,
    identity_options,
    model_device,
    pin_threads,
    plan_batches,
    settle_method,
    train_loop,
)

# The authors fine-tune fully at 1e-5 for one epoch (8B models, 8,000 trajectories); LoRA's
# usual rate is about ten times higher.
DEFAULT_LR = {FineTune.FULL: 1e-5, FineTune.LORA: 2e-4}



def attach_method(model: Any, options: TrainOptions) -> dict[str, Any]:
    """The parameters to train: all of them, or LoRA adapters (the base frozen)."""
    if options.method == FineTune.LORA:
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
    training; default no worked examples), the loss curve, and drop the checkpoint. A LoRA run also
    writes its adapter, over the first base that is not itself an adapter (OUT/adapter)."""
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
    if options.method == FineTune.LORA:
        write_run_adapter(adapter_factors(model), out / ADAPTER_SUBDIR, report)
        merge_lora(model)
    else:  # a stale adapter from an earlier LoRA run here would claim these weights
        shutil.rmtree(out / ADAPTER_SUBDIR, ignore_errors=True)
    model.eval()
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
