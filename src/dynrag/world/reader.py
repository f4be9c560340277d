"""``dynrag world reader``: adapt a model into a reader of the world's passages on worlds made with
*other* seeds, so that the world it is later tested on cannot leak into its training.

    OUT/worlds/seed-N/     each training world, made and probed with the base model (resumable)
    OUT/config.json, model.safetensors, tokenizer files   an HF directory: --model hf:OUT
    OUT/deeprag.json       marks it complete; seeds, the avoided world, row counts
    OUT/train_log.jsonl    one line per optimizer step; OUT/checkpoint/ while training

Rows: every one-hop fictional question of each training world's train split, asked over its gold
passage and up to two of the record's other passages in a seeded order, in the prompt style
``world check`` reads with; and as many closed-book questions on real facts the base model was
probed to know (replay), so that what it knows is kept. Those two alone are the ``answer`` style:
a reader that answers at once. The ``chain`` style (the default) adds multi-hop train questions in
the methods' own prompt, answered one sentence per hop (``world/chain_text.py``), so that inside
FLARE or DRAGIN the reader writes the chain their triggers act on. An example that names an
invented entity of the test world (``avoid``) is dropped and counted: two seeds can draw the same
made-up name.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Sequence, get_args

from pydantic import Field
from rich.console import Console

from dynrag.errors import ConfigError
from dynrag.io.jsonl import read_jsonl
from dynrag.io.lock import DirectoryLock
from dynrag.lm.chat import ChatFrame
from dynrag.lm.loader import resolve_model
from dynrag.run.jobs import JOBS, JobTraits, ModelGroup, OutputGroup
from dynrag.training.examples import IGNORE, examples_fingerprint
from dynrag.training.finetune import FineTune
from dynrag.training.models import is_complete, load_trainable, read_meta
from dynrag.training.trainer import (
    TrainOptions, describe_schedule, identity_options, pin_threads, schedule_meta, settle_method, train_loop,
)
from dynrag.world.bank import BY_ID, RealFact
from dynrag.world.chain_text import CHAIN, PARTIAL, chain_examples, methods_builder
from dynrag.world.check import READING_INSTRUCTION
from dynrag.world.entities import World, WorldOptions, generate
from dynrag.world.make import base_verdicts, fact_relations, read_manifest
from dynrag.world.probe import INSTRUCTION, in_style, make_probed
from dynrag.world.teach import finish, packed_epochs, row_loss, trainable
from dynrag.world.teach_text import TextExample, replay_examples

DEFAULT_SEEDS = (101, 102)
Style = Literal["chain", "answer"]
STYLES: tuple[str, ...] = get_args(Style)


class ReaderOptions(TrainOptions):
    style: Style = Field(
        "chain", description="chain: also multi-hop questions answered one sentence per hop in the methods' prompt; "
                             "answer: one-hop reading and replay only")
    chain_share: float = Field(1.0, ge=0, description="chain examples per reading example (style chain)")
    partial_share: float = Field(0.5, ge=0, le=1, description="share of chain examples that start after their "
                                 "first hops are written, showing only the later hops' passages")
    method: FineTune = Field(FineTune.LORA, description="LoRA on the MLPs (default) or a full fine-tune")
    params: Literal["all", "no_embeddings", "mlp"] = Field("mlp", description="what is trained (see world teach)")
    replay_share: float = Field(1.0, ge=0, description="replayed known real facts per reading example")
    others: int = Field(2, ge=0, description="passages beside the gold ones in a reading or chain example")
    pack_tokens: int = Field(512, ge=16, description="examples are packed into rows of at most this many tokens")
    epochs: int = Field(2, ge=1)
    batch_size: int = Field(1, ge=1, description="packed rows per step")
    schedule: Literal["constant", "cosine"] = "constant"
    warmup_ratio: float = Field(0.05, ge=0, lt=1)
    lr: float | None = Field(5e-4, gt=0)


class WorldReaderJobOptions(ModelGroup, OutputGroup):
    """The `world reader` job's options: the model to adapt, OUT, the training worlds' seeds and the
    test world kept out of them."""

    seeds: Sequence[int] = Field(DEFAULT_SEEDS, description="seeds of the training worlds")
    avoid: WorldOptions = Field(default_factory=WorldOptions, description="the test world: its seed refused, its names kept out")
    options: ReaderOptions = Field(default_factory=ReaderOptions, description="the training recipe")
    max_new_tokens: int = Field(8, description="tokens per probe answer of the training worlds")


def invented_names(world: World) -> list[str]:
    """The made-up names of a world (its fictional entities), longest first."""
    return sorted({e.name for e in world.entities if not e.real}, key=len, reverse=True)


def reading_pool(records: Sequence[dict[str, Any]], frame: ChatFrame | None, others: int,
                 rng: random.Random) -> list[TextExample]:
    """One reading example per one-hop fictional bridge question: the gold passage among up to
    ``others`` of the record's other passages, shuffled."""
    pool = []
    for r in records:
        hops = r["question_decomposition"]
        if r["world"]["kind"] != "bridge" or len(hops) != 1 or hops[0]["real"]:
            continue
        gold = hops[0]["paragraph_support_idx"]
        rest = [p for p in r["paragraphs"] if p["idx"] != gold]
        chosen = [r["paragraphs"][gold]] + rng.sample(rest, min(others, len(rest)))
        rng.shuffle(chosen)
        passages = "\n".join(f"Passage: {p['paragraph_text']}" for p in chosen)
        prompt = in_style(frame, READING_INSTRUCTION, f"{passages}\nQuestion: {r['question']}")
        pool.append(TextExample("reading", prompt, f" {r['answer']}"))
    return pool


def replay_in_style(known: Sequence[RealFact], frame: ChatFrame | None, rng: random.Random, n: int) -> list[TextExample]:
    """``n`` closed-book questions on known real facts, in the probe's prompt style."""
    return replay_examples(known, rng, n, lambda question: in_style(frame, INSTRUCTION, f"Question: {question}"))


def drop_leaks(examples: Sequence[TextExample], names: Sequence[str]) -> tuple[list[TextExample], int]:
    """(examples naming none of ``names``, how many were dropped)."""
    kept = [ex for ex in examples if not any(name in ex.text for name in names)]
    return kept, len(examples) - len(kept)


def check_seeds(seeds: Sequence[int], avoid: WorldOptions) -> None:
    if not seeds:
        raise ConfigError("--seeds: give at least one training world's seed")
    twice = next((s for i, s in enumerate(seeds) if s in seeds[:i]), None)
    if twice is not None:  # both would name OUT/worlds/seed-N: one world trained on twice
        raise ConfigError(f"--seeds {','.join(map(str, seeds))}: seed {twice} is given twice (each seed names one world)")
    if avoid.seed in seeds:
        raise ConfigError(f"--seeds {','.join(map(str, seeds))}: seed {avoid.seed} is the test world's; "
                          "train on worlds of other seeds")


def training_worlds(req: WorldReaderJobOptions, console: Console, progress: bool) -> list[Path]:
    """Each training world under OUT/worlds, made and probed with the base model unless already there."""
    dirs = []
    for seed in req.seeds:
        world = Path(req.out) / "worlds" / f"seed-{seed}"
        manifest = world / "manifest.json"
        if not (manifest.exists() and read_manifest(world).get("model") == req.model):
            console.print(f"reader: making the training world of seed {seed} (probed with {req.model})")
            make_probed(req.avoid.model_copy(update={"seed": seed}), world, req.model, req.max_new_tokens, console,
                        progress)
        dirs.append(world)
    return dirs


@dataclass(frozen=True)
class TrainingWorld:
    """What a training world gives the reader: its train records, and the real facts its probe
    found known."""

    records: list[dict[str, Any]]
    known: dict[str, RealFact]
    relations: dict[str, str] = field(default_factory=dict)  # fact id -> relation, for chain sentences


def load_training_world(world: Path) -> TrainingWorld:
    verdicts = base_verdicts(world, read_manifest(world))
    return TrainingWorld(read_jsonl(Path(world) / "train.jsonl", whole=True),
                         {fid: BY_ID[fid] for fid, v in sorted(verdicts.items()) if v == "known"},
                         fact_relations(world))


def reader_examples(worlds: Sequence[TrainingWorld], frame: ChatFrame | None, options: ReaderOptions, avoid: World,
                    epoch: int) -> tuple[list[TextExample], dict[str, int]]:
    """One epoch's examples from every training world, leaks dropped, in a seeded order."""
    rng = random.Random(f"dynrag-world-reader:{options.seed}:{epoch}")
    reading: list[TextExample] = []
    known: dict[str, RealFact] = {}
    for world in worlds:
        reading += reading_pool(world.records, frame, options.others, rng)
        known |= world.known
    replay = replay_in_style(list(known.values()), frame, rng, round(options.replay_share * len(reading)))
    chains: list[TextExample] = []
    if options.style == "chain":  # its own generator: reading and replay stay those of the answer style
        chain_rng = random.Random(f"dynrag-world-reader-chain:{options.seed}:{epoch}")
        chains = chain_examples([(w.records, w.relations) for w in worlds], methods_builder(),
                                round(options.chain_share * len(reading)), options.partial_share, options.others,
                                chain_rng)
    kept, dropped = drop_leaks(reading + replay + chains, invented_names(avoid))
    rng.shuffle(kept)
    kinds = ("reading", "replay") + ((CHAIN, PARTIAL) if options.style == "chain" else ())
    counts = {kind: sum(ex.kind == kind for ex in kept) for kind in kinds}
    counts["dropped_for_naming_the_test_world"] = dropped
    return kept, counts


def run_reader(req: WorldReaderJobOptions, *, console: Console | None = None, progress: bool = True) -> dict[str, Any]:
    """Make the training worlds, then train (or resume, or skip when OUT is complete)."""
    console = console or Console(stderr=True)
    check_seeds(req.seeds, req.avoid)
    pin_threads(req.options)
    with DirectoryLock(Path(req.out), "training directory"):
        if is_complete(Path(req.out)):
            meta = read_meta(Path(req.out))
            style = meta.get("style", "answer")  # readers made before the styles answered at once
            if style != req.options.style:
                raise ConfigError(f"--out {req.out}: holds a reader of style {style}, not {req.options.style} "
                                  "(give another --out, or the same --style)")
            console.print(f"{req.out} already holds the reader")
            return meta
        worlds = training_worlds(req, console, progress)
        return _train(req, worlds, console, progress)


def _train(req: WorldReaderJobOptions, worlds: list[Path], console: Console, progress: bool) -> dict[str, Any]:
    out, options = Path(req.out), req.options
    model, tokenizer, source = load_trainable(req.model, progress=progress)
    settled = settle_method(options, model)
    frame = None  # hf:OUT is prompted in plain text unless asked otherwise (?prompt=chat)
    avoid = generate(req.avoid)
    sources = [load_training_world(world) for world in worlds]  # read once, sampled anew each epoch
    counts: dict[str, int] = {}

    def examples_of(epoch: int) -> list[TextExample]:
        examples, counts_of_epoch = reader_examples(sources, frame, options, avoid, epoch)
        counts.update(counts_of_epoch)
        return examples

    rows, batches = packed_epochs(tokenizer, examples_of, options)
    params = trainable(model, settled)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def step(batch: list[int]) -> dict[str, float]:
        loss, stats = row_loss(model, [rows[i] for i in batch], pad)
        loss.backward()
        return {"loss": loss.item(), **stats}

    identity = {"data": examples_fingerprint(rows), "model": resolve_model(req.model),
                "options": identity_options(settled), "seeds": list(req.seeds)}
    chains = f", {counts[CHAIN]} chain and {counts[PARTIAL]} partial chain" if options.style == "chain" else ""
    console.print(f"reader ({options.style}): {counts['reading']} reading and {counts['replay']} replay{chains} "
                  f"examples an epoch from seeds "
                  f"{', '.join(map(str, req.seeds))} ({counts['dropped_for_naming_the_test_world']} dropped for naming "
                  f"the test world), {len(rows)} packed rows, {len(batches)} steps, "
                  f"{describe_schedule(settled, settled.lr, len(batches))}")
    records = train_loop(params=params, batches=batches, step_fn=step, options=settled, lr=settled.lr, out=out,
                         identity=identity, console=console, progress=progress, description="reader")
    meta = {
        "stage": "world-reader", "base_model": resolve_model(req.model), "base_source": source,
        "style": options.style, "seeds": list(req.seeds), "avoided_world": {"seed": req.avoid.seed},
        "examples_per_epoch": counts,
        "method": settled.method, "options": settled.model_dump(), "rows": len(rows),
        "learned_tokens": sum(sum(label != IGNORE for label in r.labels) for r in rows),
        "lr_schedule": schedule_meta(settled, settled.lr, len(batches)),
    }
    return finish(model, tokenizer, out, settled.method, records, meta, f"world reader ({settled.method}, {meta['base_model']})")


JOBS.add("world reader", run_reader, WorldReaderJobOptions,
         summary="adapt a model into a reader of world passages, trained on worlds of other seeds",
         traits=JobTraits(lock="out", loop="own"))
