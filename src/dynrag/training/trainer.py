"""The training loop both stages share: fixed batches, AdamW, a JSONL log line per step, and a
checkpoint every `save_every` steps (or `save_minutes`) that a rerun after kill -9 resumes from,
optimizer state included. Steps logged after the last checkpoint are done again and their log
lines replaced, so every step appears in the log exactly once. The learning rate warms up and then
stays or decays by a cosine over the run's total step count; the checkpoint records that count and
the curve, so a resumed run continues on the same one (or is refused when they differ).
"""

from __future__ import annotations

import math
import random
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

import torch
from pydantic import Field
from rich.console import Console

from dynrag.training.checkpoint import CHECKPOINT_DIR, load_state, read_state_meta, save_state
from dynrag.errors import ConfigError
from dynrag.io.files import atomic_write_text
from dynrag.io.jsonl import JsonlAppender, json_line, read_jsonl
from dynrag.progress import progress_bar
from dynrag.registry import Options
from dynrag.training.finetune import FineTune
from dynrag.training.memory import available_bytes, check_fits

TRAIN_LOG = "train_log.jsonl"


class TrainOptions(Options):
    method: FineTune = Field(
        FineTune.AUTO, description="full fine-tune, or LoRA adapters merged at the end; auto: LoRA for a model over "
        "~1B parameters (a full fine-tune of one needs several times its size in optimizer state), else full",
    )
    lr: float | None = Field(None, gt=0, description="learning rate (default: by stage and method)")
    epochs: int = Field(1, ge=1)
    max_steps: int | None = Field(None, ge=1, description="stop after this many optimizer steps")
    batch_size: int = Field(4, ge=1)
    max_tokens: int = Field(1024, ge=16, description="longer examples are left out (and counted)")
    schedule: Literal["constant", "cosine"] = Field(
        "cosine", description="learning rate after the warm-up: constant, or cosine decay to 0 at the last step "
        "(the authors' recipe for both stages)",
    )
    warmup_ratio: float = Field(0.1, ge=0, lt=1, description="share of the steps spent warming up linearly (rounded up)")
    warmup_steps: int | None = Field(None, ge=0, description="warm-up steps; when given, used instead of warmup_ratio")
    weight_decay: float = Field(0.0, ge=0)
    max_grad_norm: float = Field(1.0, gt=0)
    save_every: int = Field(50, ge=1, description="checkpoint every N steps")
    save_minutes: float = Field(10.0, gt=0, description="... or when this long has passed since the last one")
    seed: int = 0
    threads: int | None = Field(None, ge=1, description="torch CPU threads (default: torch's choice)")
    lora_rank: int = Field(16, ge=1)
    lora_alpha: float = Field(32.0, gt=0)
    gradient_checkpointing: bool = Field(
        False, description="recompute activations in the backward pass: less memory for long examples, ~30% slower")


# Options that change how a run is carried out, not what it computes: a resumed run may differ in them.
OPERATIONAL = ("save_every", "save_minutes", "threads")


def identity_options(options: TrainOptions) -> dict[str, Any]:
    return {k: v for k, v in options.model_dump().items() if k not in OPERATIONAL}


LORA_ABOVE_PARAMETERS = 1_000_000_000


def settle_method(options: TrainOptions, model: Any, available: int | None | Literal["measure"] = "measure") -> TrainOptions:
    """``method=auto`` made concrete for the loaded model (LoRA above ~1B parameters), and
    gradient checkpointing switched on where asked; what a checkpoint's identity records. A run
    that would not fit in ``available`` bytes (by default, this machine's free memory) is refused
    here, before its first step (training/memory.py)."""
    if options.gradient_checkpointing and hasattr(model, "gradient_checkpointing_enable"):
        model.gradient_checkpointing_enable()
    if options.method == FineTune.AUTO:
        count = sum(p.numel() for p in model.parameters())
        options = options.model_copy(update={"method": FineTune.LORA if count > LORA_ABOVE_PARAMETERS else FineTune.FULL})
    check_fits(model, options.method, available_bytes(model) if available == "measure" else available)
    return options


def model_device(model: Any) -> torch.device:
    return next(model.parameters()).device


def plan_batches(lengths: Sequence[int], batch_size: int, epochs: int, seed: int, group: int = 16) -> list[list[int]]:
    """Example indices per step, fixed by the seed: each epoch shuffles, sorts windows of
    `group` batches by length (less padding), and shuffles the batch order again."""
    plan: list[list[int]] = []
    for epoch in range(epochs):
        rng = random.Random(f"{seed}:{epoch}")
        order = list(range(len(lengths)))
        rng.shuffle(order)
        batches = []
        window = batch_size * group
        for start in range(0, len(order), window):
            chunk = sorted(order[start : start + window], key=lambda i: (lengths[i], i))
            batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
        rng.shuffle(batches)
        plan += batches
    return plan


def learning_rate(step: int, base: float, warmup: int, total: int, schedule: str = "cosine") -> float:
    """The rate of optimizer step `step` (0-based) of `total`: linear warm-up to `base` over the
    first `warmup` steps (step s gets base * (s + 1) / warmup), then `base` (constant) or a half
    cosine from `base` at step `warmup` down to 0 at the last step, total - 1."""
    if step < warmup:
        return base * (step + 1) / warmup
    span = total - 1 - warmup
    if schedule == "constant" or span <= 0:
        return base
    return base * 0.5 * (1.0 + math.cos(math.pi * min(step - warmup, span) / span))


def warmup_of(options: TrainOptions, total: int) -> int:
    """Warm-up steps of a run of `total` steps: warmup_steps when given, else warmup_ratio of them, rounded up."""
    if options.warmup_steps is not None:
        return min(options.warmup_steps, total)
    # the small slack keeps float noise from rounding up a whole step (0.07 * 100 is 7.000000000000001)
    return min(math.ceil(options.warmup_ratio * total - 1e-9), total)


def schedule_meta(options: TrainOptions, lr: float, total: int) -> dict[str, Any]:
    """What fixes the learning-rate curve; a checkpoint records it, and a resumed run must match it."""
    return {"schedule": options.schedule, "lr": lr, "warmup_steps": warmup_of(options, total), "total_steps": total}


def describe_schedule(options: TrainOptions, lr: float, total: int) -> str:
    curve = schedule_meta(options, lr, total)
    return f"lr {lr:g} ({curve['schedule']}, {curve['warmup_steps']} warm-up steps of {total})"


StepFn = Callable[[list[int]], dict[str, float]]  # runs forward and backward on one batch


def train_loop(*, params: dict[str, torch.nn.Parameter], batches: list[list[int]], step_fn: StepFn, options: TrainOptions,
               lr: float, out: Path, identity: dict[str, Any], console: Console, progress: bool,
               description: str = "train", after_step: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """Run (or resume) the optimizer steps; returns the log records. `identity` (data fingerprint,
    options, model) must match a checkpoint found in OUT, else resuming is refused. `after_step`
    is called with the number of steps taken: once at the start (0, or the resumed step) and after
    each step, past its checkpoint."""
    out = Path(out)
    trainable = [p for p in params.values() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=lr, weight_decay=options.weight_decay)
    ckpt = out / CHECKPOINT_DIR
    start = 0
    meta = read_state_meta(ckpt)
    curve = schedule_meta(options, lr, len(batches))
    if meta is not None:
        differs = sorted(k for k in identity if meta.get("identity", {}).get(k) != identity[k])
        recorded = meta.get("lr_schedule", {})
        differs += [f"learning-rate {k}" for k in curve if recorded.get(k) != curve[k] and k != "total_steps"]
        if differs or meta.get("total_steps") != len(batches):
            raise ConfigError(
                f"{out} holds a training run with different {', '.join(differs) or 'step count'}; "
                "use another --out, or the same data and options to resume"
            )
        start = load_state(ckpt, params, optimizer)["step"]
        console.print(f"resuming {out} from step {start} of {len(batches)}")
    log_path = out / TRAIN_LOG
    records = [r for r in read_jsonl(log_path, repair=True) if r["step"] <= start]
    atomic_write_text(log_path, "".join(json_line(r) for r in records))
    last_save = time.monotonic()
    if after_step is not None:
        after_step(start)
    with JsonlAppender(log_path) as log, progress_bar(description, len(batches), start, console, progress, unit="steps") as bar:
        for step in range(start, len(batches)):
            started = time.perf_counter()
            rate = learning_rate(step, lr, curve["warmup_steps"], len(batches), options.schedule)
            for group in optimizer.param_groups:
                group["lr"] = rate
            metrics = step_fn(batches[step])
            grad_norm = torch.nn.utils.clip_grad_norm_(trainable, options.max_grad_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            seconds = time.perf_counter() - started
            record = {"step": step + 1, **{k: round(float(v), 6) for k, v in metrics.items()},
                      "grad_norm": round(float(grad_norm), 6), "lr": rate, "seconds": round(seconds, 4)}
            if "tokens" in metrics:
                record["tokens_per_second"] = round(metrics["tokens"] / seconds, 2)
            log.append(record)
            records.append(record)
            bar.advance(f"loss {record['loss']:.4f}")
            if (step + 1) % options.save_every == 0 or time.monotonic() - last_save > 60 * options.save_minutes:
                if step + 1 < len(batches):
                    state = {"total_steps": len(batches), "lr_schedule": curve, "identity": identity}
                    save_state(ckpt, step + 1, params, optimizer, state)
                    last_save = time.monotonic()
            if after_step is not None:
                after_step(step + 1)
    return records


def drop_checkpoint(out: Path) -> None:
    shutil.rmtree(Path(out) / CHECKPOINT_DIR, ignore_errors=True)


def pin_threads(options: TrainOptions) -> None:
    if options.threads:
        torch.set_num_threads(options.threads)
