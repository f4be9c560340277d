"""``dynrag world teach``: continued training that moves chosen fictional facts into what a model
knows, then the re-probe of the trained model (``world/teach_probe.py``).

    OUT/config.json, model.safetensors, tokenizer files   an HF directory: --model hf:OUT
    OUT/deeprag.json       marks it complete; what was taught and how
    OUT/train_log.jsonl    one line per optimizer step; OUT/loss.png its curve
    OUT/checkpoint/        while training: the state a rerun resumes from (removed at the end)
    OUT/world/             the world relabelled for the taught model (teach_probe.py)

Training rows pack several short examples (statements, questions, reading) up to ``pack_tokens``;
what is trained is LoRA adapters (default) on the MLPs' linear layers (``params=mlp``) or on every
linear layer (``all``), or ``params`` of a full fine-tune (``all``, ``no_embeddings``: everything but
the tied embedding and LM head, ``mlp``: the MLP blocks only).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Literal, Sequence

from pydantic import Field
from rich.console import Console

from dynrag.training.examples import IGNORE, TrainExample, examples_fingerprint, masked_tokens
from dynrag.training.finetune import FineTune
from dynrag.training.losses import collate, imitation_loss
from dynrag.training.lora import DEFAULT_TARGETS, add_lora, merge_lora
from dynrag.training.models import is_complete, load_trainable, read_meta, save_model_dir
from dynrag.training.plot import plot_loss
from dynrag.training.trainer import (
    TrainOptions, describe_schedule, drop_checkpoint, identity_options, model_device, pin_threads, schedule_meta,
    settle_method, train_loop,
)
from dynrag.errors import ConfigError
from dynrag.io.jsonl import read_jsonl
from dynrag.io.lock import DirectoryLock
from dynrag.lm.base import Prompt
from dynrag.lm.device import autocast
from dynrag.lm.loader import resolve_model
from dynrag.run.jobs import JOBS, JobTraits, ModelGroup, OutputGroup
from dynrag.world.entities import Fact, World, WorldOptions, generate
from dynrag.world.bank import BY_ID, RealFact
from dynrag.world.make import base_verdicts, read_manifest
from dynrag.world.teach_probe import reprobe_and_relabel
from dynrag.world.teach_text import TextExample, choose, epoch_examples

MLP_TARGETS = ("gate_proj", "up_proj", "down_proj")
DEFAULT_LR = {FineTune.FULL: 3e-4, FineTune.LORA: 1e-3}  # 1e-3 LoRA taught 12 of 12 facts in 132 steps (benchmarks/LOG.md)


class TeachOptions(TrainOptions):
    method: FineTune = Field(
        FineTune.LORA, description="LoRA adapters merged at the end (the cheapest step measured), or a full fine-tune of `params`")
    params: Literal["all", "no_embeddings", "mlp"] = Field(
        "mlp", description="what a full fine-tune trains (LoRA: all -> every linear layer, else the MLPs')")
    statements: int = Field(4, ge=0, description="paraphrased write-ups of each taught entity per epoch")
    reading_share: float = Field(0.25, ge=0, description="reading examples per closed-book training question")
    replay_share: float = Field(1.0, ge=0, description="closed-book questions on real facts the base model knows, "
                                "per training question (none when the world was made without --model)")
    pack_tokens: int = Field(256, ge=16, description="examples are packed into rows of at most this many tokens")
    epochs: int = Field(12, ge=1)
    batch_size: int = Field(1, ge=1, description="packed rows per step")
    schedule: Literal["constant", "cosine"] = "constant"
    warmup_ratio: float = Field(0.05, ge=0, lt=1)


class TeachJobOptions(ModelGroup, OutputGroup):
    """The `world teach` job's options: the model to train, OUT, the world and which of its facts."""

    world: Path = Field(description="a world made with `dynrag world make`")
    entities: int | None = Field(None, description="teach every fact of N train-split entities (None: 1)")
    facts: int | None = Field(None, description="teach N facts of train-split entities instead")
    options: TeachOptions = Field(default_factory=TeachOptions, description="the training recipe")
    max_new_tokens: int = Field(8, description="tokens per probe answer")


def load_world(world_dir: Path) -> tuple[World, dict[str, Any], list[dict[str, Any]]]:
    """(the world's entities and facts, its manifest, its train records)."""
    manifest = read_manifest(world_dir)
    world = generate(WorldOptions(**manifest["options"]))
    return world, manifest, read_jsonl(Path(world_dir) / "train.jsonl", whole=True)


def tokenize(tokenizer: Any, example: TextExample) -> tuple[list[int], list[int]]:
    """(ids, labels) of one example: loss on its learned text and the end-of-sequence token after it."""
    ids, labels = masked_tokens(tokenizer, Prompt().add("given", example.given).add("learned", example.learned), ("learned",))
    if tokenizer.eos_token_id is not None:
        ids.append(tokenizer.eos_token_id)
        labels.append(tokenizer.eos_token_id)
    return ids, labels


def pack(pieces: Sequence[tuple[list[int], list[int]]], width: int, tag: str) -> list[TrainExample]:
    """Consecutive pieces joined into rows of at most ``width`` tokens (a longer piece is a row alone)."""
    rows: list[TrainExample] = []
    ids: list[int] = []
    labels: list[int] = []
    for piece_ids, piece_labels in pieces:
        if ids and len(ids) + len(piece_ids) > width:
            rows.append(TrainExample(f"{tag}-{len(rows)}", tuple(ids), tuple(labels)))
            ids, labels = [], []
        ids += piece_ids
        labels += piece_labels
    if ids:
        rows.append(TrainExample(f"{tag}-{len(rows)}", tuple(ids), tuple(labels)))
    return rows


def build_rows(tokenizer: Any, world: World, taught: Sequence[Fact], train: Sequence[dict[str, Any]],
               options: TeachOptions, known: Sequence[RealFact] = ()) -> tuple[list[TrainExample], list[list[int]]]:
    """(packed rows of every epoch, the row indices of each step); ``known``: real facts to replay."""
    return packed_epochs(tokenizer, lambda epoch: epoch_examples(
        world, taught, train, options.seed, epoch, options.statements, options.reading_share, known,
        options.replay_share), options)


def packed_epochs(tokenizer: Any, examples_of: Callable[[int], Sequence[TextExample]],
                  options: Any) -> tuple[list[TrainExample], list[list[int]]]:
    """(packed rows of every epoch, the row indices of each step): each epoch's examples
    (``examples_of(epoch)``) packed into rows of ``options.pack_tokens``, ``options.batch_size``
    rows a step, cut at ``options.max_steps``."""
    rows: list[TrainExample] = []
    batches: list[list[int]] = []
    for epoch in range(options.epochs):
        epoch_rows = pack([tokenize(tokenizer, t) for t in examples_of(epoch)], options.pack_tokens, f"e{epoch}")
        first = len(rows)
        rows += epoch_rows
        order = list(range(first, len(rows)))
        batches += [order[i:i + options.batch_size] for i in range(0, len(order), options.batch_size)]
    return rows, batches[: options.max_steps] if options.max_steps else batches


def trainable(model: Any, options: TeachOptions) -> dict[str, Any]:
    """The parameters the run trains (the rest frozen)."""
    if options.method == FineTune.LORA:
        targets = DEFAULT_TARGETS if options.params == "all" else MLP_TARGETS
        return add_lora(model, options.lora_rank, options.lora_alpha, targets, seed=options.seed)
    frozen = {id(model.get_input_embeddings().weight), id(model.get_output_embeddings().weight)}
    out = {}
    for name, p in model.named_parameters():
        keep = (options.params == "all" or (options.params == "no_embeddings" and id(p) not in frozen)
                or (options.params == "mlp" and ".mlp." in name))
        p.requires_grad_(keep)
        if keep:
            out[name] = p
    return out


def row_loss(model: Any, rows: Sequence[TrainExample], pad: int) -> tuple[Any, dict[str, float]]:
    device = model_device(model)
    ids, mask, labels = (t.to(device) for t in collate(rows, pad))
    with autocast(str(device)):
        loss, learned = imitation_loss(model, ids, mask, labels)
    return loss, {"tokens": float(mask.sum()), "learned_tokens": float(learned)}


def run_teach(req: TeachJobOptions, *, console: Console | None = None, progress: bool = True) -> dict[str, Any]:
    """Train (or resume, or skip when OUT is complete), then re-probe and relabel the world."""
    console = console or Console(stderr=True)
    options, out = req.options, Path(req.out)
    world, manifest, train = load_world(req.world)  # a bad world fails before the model loads
    try:
        taught = choose(world, options.seed, req.entities, req.facts)
    except ValueError as exc:
        raise ConfigError(f"{req.world}: {exc}") from None
    pin_threads(options)
    with DirectoryLock(out, "training directory"):
        if is_complete(out):
            console.print(f"{out} already holds the taught model; re-probing it")
            report = read_meta(out)
        else:
            report = _train(req, world, taught, train, console, progress)
        report["probe"] = reprobe_and_relabel(Path(req.world), manifest, world, taught, out, console, progress,
                                              req.max_new_tokens)
    return report


def _train(req: TeachJobOptions, world: World, taught: Sequence[Fact], train: Sequence[dict[str, Any]],
           console: Console, progress: bool) -> dict[str, Any]:
    out = Path(req.out)
    model, tokenizer, source = load_trainable(req.model, progress=progress)
    options = settle_method(req.options, model)
    known = [BY_ID[fid] for fid, v in base_verdicts(Path(req.world), read_manifest(req.world)).items() if v == "known"]
    rows, batches = build_rows(tokenizer, world, taught, train, options, known)
    params = trainable(model, options)
    lr = options.lr or DEFAULT_LR[options.method]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def step(batch: list[int]) -> dict[str, float]:
        loss, stats = row_loss(model, [rows[i] for i in batch], pad)
        loss.backward()
        return {"loss": loss.item(), **stats}

    identity = {"data": examples_fingerprint(rows), "model": resolve_model(req.model), "options": identity_options(options),
                "taught": [f.id for f in taught]}
    count = sum(p.numel() for p in params.values())
    console.print(f"teach: {len(taught)} facts of {len({f.subject for f in taught})} entities, {len(rows)} packed rows, "
                  f"{len(batches)} steps, {options.method} ({options.params}, {count:,} trainable parameters), "
                  f"{describe_schedule(options, lr, len(batches))}")
    records = train_loop(params=params, batches=batches, step_fn=step, options=options, lr=lr, out=out,
                         identity=identity, console=console, progress=progress, description="teach")
    meta = {
        "stage": "teach",
        "base_model": resolve_model(req.model),
        "base_source": source,
        "world": str(req.world),
        "taught": [f.id for f in taught],
        "method": options.method,
        "options": options.model_dump(),
        "trainable_parameters": count,
        "rows": len(rows),
        "learned_tokens": sum(sum(label != IGNORE for label in r.labels) for r in rows),
        "lr": lr,
        "lr_schedule": schedule_meta(options, lr, len(batches)),
    }
    return finish(model, tokenizer, out, options.method, records, meta, f"teach ({options.method}/{options.params}, {meta['base_model']})")


def finish(model: Any, tokenizer: Any, out: Path, method: FineTune, records: Sequence[dict[str, Any]], meta: dict[str, Any],
           title: str) -> dict[str, Any]:
    """After the last step: LoRA merged, the HF directory written with ``meta`` and the step figures,
    the loss curve drawn, the checkpoint removed; returns the meta written."""
    if method == FineTune.LORA:
        merge_lora(model)
    model.eval()
    seconds = sum(r["seconds"] for r in records)
    meta = meta | {
        "steps": len(records),
        "first_loss": records[0]["loss"] if records else None,
        "final_loss": records[-1]["loss"] if records else None,
        "seconds_per_step": round(seconds / len(records), 3) if records else None,
    }
    save_model_dir(model, tokenizer, out, meta)
    plot_loss(list(records), out / "loss.png", title)
    drop_checkpoint(out)
    return meta


JOBS.add("world teach", run_teach, TeachJobOptions,
         summary="train chosen fictional facts into a model, then re-probe it and relabel the world",
         traits=JobTraits(lock="out", loop="own"))
