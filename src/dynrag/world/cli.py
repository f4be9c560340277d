"""The `world` commands (make, check, teach); dynrag.cli registers them through ``register``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable, ContextManager, Optional

import typer
from rich.console import Console

from dynrag.run.flags import model_flag, progress_flag


def _default(option: str):
    """A size's default, from WorldOptions (the one place defaults are written)."""
    from dynrag.world.entities import WorldOptions

    return WorldOptions.model_fields[option].default


def register(app: typer.Typer, user_errors: Callable[[], ContextManager[None]]) -> None:
    world = typer.Typer(no_args_is_help=True, help="A generated benchmark whose facts the model is known to know or not.")

    @world.command("make")
    def make_command(
        out: Path = typer.Option(..., "--out", metavar="DIR", help="World directory: new, empty, or a world made before (made again in place)."),
        seed: int = typer.Option(1, "--seed", metavar="N", help="Seed: the same seed and sizes give the same bytes."),
        model: Optional[str] = model_flag(role="Model to probe first (without it real facts stay unprobed, known: null)"),
        people: int = typer.Option(_default("people"), "--people", metavar="N", help="People in the main cluster."),
        companies: int = typer.Option(_default("companies"), "--companies", metavar="N", help="Companies in the main cluster."),
        schools: int = typer.Option(_default("schools"), "--schools", metavar="N", help="Schools in the main cluster."),
        towns: int = typer.Option(_default("towns"), "--towns", metavar="N", help="Towns in the main cluster."),
        distractor_share: float = typer.Option(_default("distractor_share"), "--distractor-share", metavar="X", help="Size of the distractor cluster against the main one."),
        real_facts: int = typer.Option(_default("real_facts"), "--real-facts", metavar="N", help="Bank facts beyond those of the towns' countries."),
        questions: int = typer.Option(_default("questions"), "--questions", metavar="N", help="Most questions per hop count (1-hop, fictional and real each: twice that)."),
        comparisons: int = typer.Option(_default("comparisons"), "--comparisons", metavar="N", help="Most comparison questions."),
        train_share: float = typer.Option(_default("train_share"), "--train-share", metavar="X", help="Share of first entities whose questions go to train."),
        dev_share: float = typer.Option(_default("dev_share"), "--dev-share", metavar="X", help="Share for dev; test takes the rest."),
        max_new_tokens: int = typer.Option(8, "--max-new-tokens", metavar="N", help="Tokens per probe answer."),
        progress: bool = progress_flag(),
    ) -> None:
        """Generate a world: corpus, entities, facts, train/dev/test questions and a manifest."""
        with user_errors():
            from dynrag.registry import parse_model
            from dynrag.run.jobs import JOBS
            from dynrag.world.entities import WorldOptions
            from dynrag.world.probe import WorldMakeJobOptions

            options = parse_model(WorldOptions, dict(
                seed=seed, people=people, companies=companies, schools=schools, towns=towns,
                distractor_share=distractor_share, real_facts=real_facts, questions=questions,
                comparisons=comparisons, train_share=train_share, dev_share=dev_share), "world make")
            job = WorldMakeJobOptions(out=out, options=options, model=model, max_new_tokens=max_new_tokens)
            manifest = JOBS.open("world make", job, console=Console(stderr=True), progress=progress)
            sys.stdout.write(json.dumps({"out": str(out), "model": manifest["model"], "counts": manifest["counts"]},
                                        indent=2) + "\n")

    @world.command("check")
    def check_command(
        world_dir: Path = typer.Option(..., "--world", metavar="DIR", help="A world made with --model M."),
        model: str = model_flag("bundled", role="The model the world was probed with"),
        max_new_tokens: int = typer.Option(8, "--max-new-tokens", metavar="N", help="Tokens per answer."),
        chains: bool = typer.Option(False, "--chains/--no-chains", help="Also the share of dev's multi-hop questions "
                                    "answered with a sentence per hop in the methods' prompt (a chain reader's figure)."),
        progress: bool = progress_flag(),
    ) -> None:
        """Closed-book EM on known and unknown 1-hop dev facts, and EM reading the gold passage."""
        with user_errors():
            from dynrag.run.jobs import JOBS
            from dynrag.world.check import WorldCheckJobOptions, table

            job = WorldCheckJobOptions(world=world_dir, model=model, max_new_tokens=max_new_tokens, chains=chains)
            report = JOBS.open("world check", job, console=Console(stderr=True), progress=progress)
            Console().print(table(report))

    @world.command("teach")
    def teach_command(
        world_dir: Path = typer.Option(..., "--world", metavar="DIR", help="A world made with `dynrag world make`."),
        out: Path = typer.Option(..., "--out", metavar="DIR", help="Output HF directory (--model hf:DIR), resumed when interrupted; "
                                 "OUT/world is the world relabelled for it."),
        model: str = model_flag("bundled", role="Model to train"),
        entities: Optional[int] = typer.Option(None, "--entities", metavar="N", help="Teach every fact of N train-split entities (default 1)."),
        facts: Optional[int] = typer.Option(None, "--facts", metavar="N", help="Teach N facts of train-split entities instead."),
        method: Optional[str] = typer.Option(None, "--method", help="lora (default) | full | auto"),
        params: Optional[str] = typer.Option(None, "--params", help="mlp (default) | no_embeddings | all: what is trained (LoRA: the MLPs' or every linear layer)."),
        lr: Optional[float] = typer.Option(None, "--lr", help="Learning rate (default 3e-4 full, 1e-3 LoRA)."),
        epochs: Optional[int] = typer.Option(None, "--epochs", help="Passes, each with fresh paraphrases (default 12)."),
        max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Stop after N optimizer steps."),
        batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Packed rows per step (default 1)."),
        save_every: Optional[int] = typer.Option(None, "--save-every", help="Checkpoint every N steps (default 50)."),
        threads: Optional[int] = typer.Option(None, "--threads", help="torch CPU threads."),
        option: list[str] = typer.Option([], "--option", help="Other option KEY=VALUE (statements, reading_share, replay_share, pack_tokens, "
                                         "schedule, warmup_ratio, seed, lora_rank, lora_alpha, ...)."),
        max_new_tokens: int = typer.Option(8, "--max-new-tokens", metavar="N", help="Tokens per probe answer."),
        progress: bool = progress_flag(),
    ) -> None:
        """Train chosen fictional facts into the model, re-probe it and relabel the world for it."""
        with user_errors():
            from dynrag.errors import ConfigError
            from dynrag.lm.spec import ModelSpec
            from dynrag.registry import parse_model, parse_pairs
            from dynrag.training.finetune import FineTune
            from dynrag.world.make import read_manifest
            from dynrag.run.jobs import JOBS
            from dynrag.world.teach import TeachJobOptions, TeachOptions

            if entities is not None and facts is not None:
                raise ConfigError("--entities and --facts: give one of them")
            for flag, n in (("--entities", entities), ("--facts", facts)):
                if n is not None and n < 1:
                    raise ConfigError(f"{flag} {n}: must be at least 1")
            read_manifest(world_dir)
            flags = dict(method=method or FineTune.LORA, params=params, lr=lr, epochs=epochs, max_steps=max_steps,
                         batch_size=batch_size, save_every=save_every, threads=threads)
            values = {k: v for k, v in flags.items() if v is not None} | parse_pairs(option)
            options = parse_model(TeachOptions, values, "world teach")
            request = TeachJobOptions(world=world_dir, out=out, model=model, entities=entities, facts=facts, options=options,
                                      max_new_tokens=max_new_tokens)
            report = JOBS.open("world teach", request, console=Console(stderr=True), progress=progress)
            sys.stdout.write(json.dumps({"out": str(out), "world": str(out / "world"), "model": str(ModelSpec.for_path(out)),
                                         "steps": report.get("steps"), "seconds_per_step": report.get("seconds_per_step"),
                                         **report["probe"]}, indent=2) + "\n")

    @world.command("reader")
    def reader_command(
        out: Path = typer.Option(..., "--out", metavar="DIR", help="Output HF directory (--model hf:DIR), resumed when "
                                 "interrupted; OUT/worlds holds the training worlds."),
        seeds: str = typer.Option("101,102", "--seeds", metavar="N,N", help="Seeds of the training worlds."),
        test_seed: int = typer.Option(1, "--test-seed", metavar="N", help="Seed of the world the reader will be tested "
                                      "on (default sizes): refused as a training seed, its invented names kept out."),
        model: str = model_flag("bundled", role="Model to adapt"),
        style: str = typer.Option("chain", "--style", metavar="chain|answer", help="chain: also multi-hop questions "
                                  "answered one sentence per hop in the methods' prompt; answer: one-hop reading only."),
        epochs: Optional[int] = typer.Option(None, "--epochs", help="Passes over the examples (default 2)."),
        max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Stop after N optimizer steps."),
        threads: Optional[int] = typer.Option(None, "--threads", help="torch CPU threads."),
        option: list[str] = typer.Option([], "--option", help="Other option KEY=VALUE (lr, replay_share, others, "
                                         "chain_share, partial_share, pack_tokens, batch_size, method, params, "
                                         "lora_rank, seed, ...)."),
        progress: bool = progress_flag(),
    ) -> None:
        """Adapt a model into a reader of world passages, trained on worlds of other seeds."""
        with user_errors():
            from dynrag.errors import ConfigError
            from dynrag.lm.spec import ModelSpec
            from dynrag.registry import parse_model, parse_pairs
            from dynrag.world.entities import WorldOptions
            from dynrag.run.jobs import JOBS
            from dynrag.world.reader import STYLES, ReaderOptions, WorldReaderJobOptions

            if style not in STYLES:
                raise ConfigError(f"--style {style}: choose one of {', '.join(STYLES)}")
            try:
                seed_list = [int(s) for s in seeds.split(",") if s.strip()]
            except ValueError:
                raise ConfigError(f"--seeds {seeds}: expected seeds separated by commas, e.g. 101,102") from None
            flags = dict(style=style, epochs=epochs, max_steps=max_steps, threads=threads)
            values = {k: v for k, v in flags.items() if v is not None} | parse_pairs(option)
            options = parse_model(ReaderOptions, values, "world reader")
            request = WorldReaderJobOptions(out=out, seeds=seed_list, model=model, avoid=WorldOptions(seed=test_seed),
                                            options=options)
            report = JOBS.open("world reader", request, console=Console(stderr=True), progress=progress)
            sys.stdout.write(json.dumps({"out": str(out), "model": str(ModelSpec.for_path(out)), "style": report.get("style"),
                                         "steps": report.get("steps"),
                                         "examples_per_epoch": report.get("examples_per_epoch"),
                                         "seconds_per_step": report.get("seconds_per_step")}, indent=2) + "\n")

    app.add_typer(world, name="world")

