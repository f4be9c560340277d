"""`dynrag train imitation` and `dynrag train calibration`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable, ContextManager, Optional

import typer
from rich.console import Console

MODEL_HELP = "bundled | bundled:NAME | hf:PATH_OR_ID[#FILE.gguf]"


def train_options(option: list[str], **flags: Any):
    """TrainOptions from the explicit flags and --option KEY=VALUE pairs (unknown keys are errors)."""
    from dynrag.deeprag.trainer import TrainOptions
    from dynrag.registry import parse_model, parse_pairs

    values: dict[str, Any] = {k: v for k, v in flags.items() if v is not None}
    values.update(parse_pairs(option))
    return parse_model(TrainOptions, values, "training")


def register_train(train: typer.Typer, user_errors: Callable[[], ContextManager[None]]) -> None:
    @train.command("imitation")
    def imitation_command(
        data: list[Path] = typer.Option(..., "--data", help="A synth output directory or trajectories.jsonl (repeatable)."),
        out: Path = typer.Option(..., "--out", help="Output HF directory (resumed when a run was interrupted)."),
        model: str = typer.Option("bundled", "--model", help=f"Model to fine-tune: {MODEL_HELP}."),
        method: Optional[str] = typer.Option(None, "--method", help="full (default) | lora"),
        lr: Optional[float] = typer.Option(None, "--lr", help="Learning rate (default 1e-5 full, 2e-4 LoRA)."),
        epochs: Optional[int] = typer.Option(None, "--epochs", help="Passes over the trajectories (default 1)."),
        max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Stop after N optimizer steps."),
        batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Trajectories per step (default 4)."),
        save_every: Optional[int] = typer.Option(None, "--save-every", help="Checkpoint every N steps (default 50)."),
        threads: Optional[int] = typer.Option(None, "--threads", help="torch CPU threads."),
        option: list[str] = typer.Option([], "--option", help="Other training option KEY=VALUE (max_tokens, warmup_steps, weight_decay, max_grad_norm, save_minutes, seed, lora_rank, lora_alpha)."),
        progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress."),
    ) -> None:
        """Stage I: supervised fine-tuning on the narratives found by `dynrag synth` (passages masked)."""
        with user_errors():
            from dynrag.deeprag.imitation import ImitationRequest, run_imitation

            options = train_options(option, method=method, lr=lr, epochs=epochs, max_steps=max_steps,
                                    batch_size=batch_size, save_every=save_every, threads=threads)
            report = run_imitation(ImitationRequest(list(data), out, model, options), console=Console(stderr=True), progress=progress)
            sys.stdout.write(json.dumps(report, indent=2) + "\n")
