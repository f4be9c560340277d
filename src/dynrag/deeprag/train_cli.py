"""`dynrag train imitation`, `dynrag train calibration` and `dynrag train grpo`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable, ContextManager, Optional

import typer
from rich.console import Console

from dynrag.run.flags import (
    aliases_flag, corpus_flag, data_flag, dataset_flag, exemplars_flag, limit_flag, model_flag, progress_flag,
    retriever_flag, retriever_option_flag, skip_bad_flag,
)

SCHEDULE_HELP = "constant | cosine (default: cosine decay to 0 at the last step, as the authors)"
WARMUP_HELP = "Share of the steps warming up linearly (default 0.1, as the authors; --option warmup_steps=N instead)."


def train_options(option: list[str], stage: str = "imitation", recipe: str = "authors", **flags: Any):
    """The stage's training options from the explicit flags and --option KEY=VALUE pairs (unknown
    keys are errors); GRPO's over its named `recipe`."""
    from dynrag.registry import parse_model, parse_pairs

    values: dict[str, Any] = {k: v for k, v in flags.items() if v is not None}
    values.update(parse_pairs(option))
    if stage == "grpo":
        from dynrag.deeprag.grpo_options import grpo_options

        return grpo_options(recipe, values)
    if stage == "calibration":
        from dynrag.deeprag.calibration import CalibrationOptions as model
    else:
        from dynrag.training.trainer import TrainOptions as model
    return parse_model(model, values, "training")


def register_train(train: typer.Typer, user_errors: Callable[[], ContextManager[None]]) -> None:
    @train.command("imitation")
    def imitation_command(
        data: list[Path] = typer.Option(..., "--data", help="A synth output directory or trajectories.jsonl (repeatable)."),
        out: Path = typer.Option(..., "--out", help="Output HF directory (resumed when a run was interrupted)."),
        model: str = model_flag("bundled", role="Model to fine-tune"),
        method: Optional[str] = typer.Option(None, "--method", help="auto (default: lora above ~1B parameters, else full) | full | lora"),
        lr: Optional[float] = typer.Option(None, "--lr", help="Learning rate (default 1e-5 full, 2e-4 LoRA)."),
        epochs: Optional[int] = typer.Option(None, "--epochs", help="Passes over the trajectories (default 1)."),
        schedule: Optional[str] = typer.Option(None, "--schedule", help=SCHEDULE_HELP),
        warmup_ratio: Optional[float] = typer.Option(None, "--warmup-ratio", help=WARMUP_HELP),
        max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Stop after N optimizer steps."),
        batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Trajectories per step (default 4)."),
        save_every: Optional[int] = typer.Option(None, "--save-every", help="Checkpoint every N steps (default 50)."),
        threads: Optional[int] = typer.Option(None, "--threads", help="torch CPU threads."),
        option: list[str] = typer.Option([], "--option", help="Other training option KEY=VALUE (max_tokens, warmup_steps, weight_decay, max_grad_norm, save_minutes, seed, lora_rank, lora_alpha, gradient_checkpointing)."),
        progress: bool = progress_flag(),
    ) -> None:
        """Stage I: supervised fine-tuning on the narratives found by `dynrag synth` (passages masked)."""
        with user_errors():
            from dynrag.deeprag.imitation import ImitationJobOptions
            from dynrag.run.jobs import JOBS

            options = train_options(option, method=method, lr=lr, epochs=epochs, max_steps=max_steps, schedule=schedule,
                                    warmup_ratio=warmup_ratio, batch_size=batch_size, save_every=save_every, threads=threads)
            request = ImitationJobOptions(data=list(data), out=out, model=model, options=options)
            report = JOBS.open("train imitation", request, console=Console(stderr=True), progress=progress)
            sys.stdout.write(json.dumps(report, indent=2) + "\n")

    @train.command("calibration")
    def calibration_command(
        model: str = model_flag(..., role="The stage-I model (e.g. hf:ckpt/imi), target of the search and the frozen reference"),
        dataset: str = dataset_flag(...),
        data: Path = data_flag(..., role="Further training questions (not those of stage I, never those you evaluate on)"),
        out: Path = typer.Option(..., "--out", help="Output HF directory (resumed when a run was interrupted)."),
        corpus: str = corpus_flag("contexts"),
        teacher: Optional[str] = typer.Option(None, "--teacher", help="target (default) | dataset | a model spec, as for synth."),
        hop_reader: Optional[str] = typer.Option(None, "--hop-reader", help="A model spec that writes retrieved steps' answers, as for synth (default: the teacher)."),
        limit: Optional[int] = limit_flag(role="Questions after --skip"),
        skip: int = typer.Option(0, "--skip", help="Leave out the first N questions of the file."),
        max_steps_search: Optional[int] = typer.Option(None, "--max-subqueries", help="T of the search: most sub-questions (default: the dataset's DeepRAG limit)."),
        max_retrievals: Optional[int] = typer.Option(None, "--max-retrievals", help="R of the search: most retrievals (default: the dataset's DeepRAG limit)."),
        max_nodes: Optional[int] = typer.Option(None, "--max-nodes", help="Most tree nodes expanded per question (default: the whole tree for T and R)."),
        k: int = typer.Option(3, "--k", help="Passages per retrieval."),
        match: str = typer.Option("em", "--match", help="em | contains | f1:T, as for synth"),
        shots: Optional[int] = typer.Option(None, "--shots", help="Worked examples in the stage-I model's search prompt (default 0: as it was trained; more can help a model trained on little data)."),
        pairs: str = typer.Option("optimal", "--pairs", help="Preference pairs: optimal (per step of the optimal narrative, marker against marker; default) | response (whole responses per step) | all-nodes (every rankable node of the tree) | sentence-order (whole narratives, fewer retrievals chosen). docs/deeprag.md."),
        beta: float = typer.Option(0.4, "--beta", help="DPO beta."),
        heldout: float = typer.Option(0.1, "--heldout", help="Share of questions whose pairs are kept out of training, to measure on."),
        method: Optional[str] = typer.Option(None, "--method", help="auto (default: lora above ~1B parameters, else full) | full | lora"),
        lr: Optional[float] = typer.Option(None, "--lr", help="Learning rate (default 5e-7 full, as the authors; 5e-5 LoRA)."),
        epochs: Optional[int] = typer.Option(None, "--epochs", help="Passes over the pairs (default 8, as the authors)."),
        schedule: Optional[str] = typer.Option(None, "--schedule", help=SCHEDULE_HELP),
        warmup_ratio: Optional[float] = typer.Option(None, "--warmup-ratio", help=WARMUP_HELP),
        max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Stop after N optimizer steps."),
        batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Pairs per step (default 4)."),
        save_every: Optional[int] = typer.Option(None, "--save-every", help="Checkpoint every N steps (default 50)."),
        threads: Optional[int] = typer.Option(None, "--threads", help="torch CPU threads."),
        option: list[str] = typer.Option([], "--option", help="Other training option KEY=VALUE, as for imitation."),
        retriever: Optional[str] = retriever_flag(),
        aliases: Optional[Path] = aliases_flag(),
        skip_bad: bool = skip_bad_flag(),
        progress: bool = progress_flag(),
    ) -> None:
        """Stage II: search again with the stage-I model, build preference pairs (--pairs), DPO."""
        with user_errors():
            from dynrag.deeprag.calibration import CalibrationJobOptions
            from dynrag.deeprag.synth import SynthJobOptions
            from dynrag.run.jobs import JOBS

            options = train_options(option, "calibration", method=method, lr=lr, epochs=epochs, max_steps=max_steps,
                                    schedule=schedule, warmup_ratio=warmup_ratio, batch_size=batch_size,
                                    save_every=save_every, threads=threads)
            search = SynthJobOptions(dataset=dataset, data=data, out=out / "synth", corpus=corpus, model=model, teacher=teacher, hop_reader=hop_reader,
                                  limit=limit, skip=skip, max_steps=max_steps_search, max_retrievals=max_retrievals, max_nodes=max_nodes, k=k, match=match, shots=shots,
                                  aliases=aliases, skip_bad=skip_bad, retriever=retriever)
            request = CalibrationJobOptions(synth=search, out=out, beta=beta, heldout=heldout, options=options, pairs=pairs)
            report = JOBS.open("train calibration", request, console=Console(stderr=True), progress=progress)
            sys.stdout.write(json.dumps(report, indent=2) + "\n")

    @train.command("grpo")
    def grpo_command(
        model: str = model_flag(..., role="The stage-I model (e.g. hf:ckpt/imi), the policy's start and the frozen KL reference"),
        dataset: str = dataset_flag(...),
        data: Path = data_flag(..., role="Training questions (never those you evaluate on)"),
        out: Path = typer.Option(..., "--out", help="Output HF directory (resumed when a run was interrupted)."),
        corpus: str = corpus_flag("contexts"),
        limit: Optional[int] = limit_flag(role="Questions after --skip"),
        skip: int = typer.Option(0, "--skip", help="Leave out the first N questions of the file."),
        recipe: str = typer.Option("authors", "--recipe", help="authors (default: the authors' training script) | cpu-small (small steps for two CPU cores); the flags below override it. docs/deeprag.md."),
        group: Optional[int] = typer.Option(None, "--group", "-G", help="Narratives sampled per question (authors 8, cpu-small 4)."),
        temperature: Optional[float] = typer.Option(None, "--temperature", help="Sampling temperature of the rollouts (default 1.0)."),
        top_p: Optional[float] = typer.Option(None, "--top-p", help="Nucleus sampling mass (authors 0.95, cpu-small 1.0: off)."),
        beta: Optional[float] = typer.Option(None, "--beta", help="KL penalty weight to the stage-I model (authors 0.001, cpu-small 0.04; 0: none)."),
        entropy_coef: Optional[float] = typer.Option(None, "--entropy-coef", help="Entropy bonus weight (authors 0.001, cpu-small 0)."),
        kl_clamp: Optional[float] = typer.Option(None, "--kl-clamp", help="Clamp each token's KL estimate to +-this (authors 10; cpu-small: unclamped)."),
        loss_average: Optional[str] = typer.Option(None, "--loss-average", help="token (authors: mean over the step's learned tokens) | rollout (cpu-small: per rollout, then over rollouts)."),
        clip: Optional[float] = typer.Option(None, "--clip", help="Epsilon of the clipped ratio (default 0.2)."),
        match: Optional[str] = typer.Option(None, "--match", help="Reward's correctness: em (default) | f1."),
        retrieval_cost: Optional[float] = typer.Option(None, "--retrieval-cost", help="Taken off a correct answer's reward per retrieval (default 0.1)."),
        k: Optional[int] = typer.Option(None, "--k", help="Passages per retrieval (default 3)."),
        max_subqueries: Optional[int] = typer.Option(None, "--max-subqueries", help="Most sub-questions per narrative (default: the dataset's DeepRAG limit, 6 on HotpotQA, 10 elsewhere)."),
        max_retrievals: Optional[int] = typer.Option(None, "--max-retrievals", help="Most retrievals per narrative (default: the dataset's DeepRAG limit)."),
        method: Optional[str] = typer.Option(None, "--method", help="auto (default: lora above ~1B parameters, else full) | full | lora"),
        lr: Optional[float] = typer.Option(None, "--lr", help="Learning rate (default 1e-6 full, 1e-5 LoRA)."),
        epochs: Optional[int] = typer.Option(None, "--epochs", help="Passes over the questions (default 1)."),
        schedule: Optional[str] = typer.Option(None, "--schedule", help="constant (authors: after the warm-up) | cosine (cpu-small)."),
        max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Stop after N optimizer steps."),
        batch_size: Optional[int] = typer.Option(None, "--questions-per-step", help="Training questions per step, their gradients accumulated (authors 32, cpu-small 4)."),
        save_every: Optional[int] = typer.Option(None, "--save-every", help="Checkpoint every N steps (default 5)."),
        threads: Optional[int] = typer.Option(None, "--threads", help="torch CPU threads."),
        option: list[str] = typer.Option([], "--option", help="Other option KEY=VALUE: training (as for imitation), reward (cost_cap, format_reward), rollout (max_new_tokens, shots)."),
        retriever: str = retriever_flag("bm25", role="Retriever"),
        retriever_option: list[str] = retriever_option_flag(),
        aliases: Optional[Path] = aliases_flag(),
        skip_bad: bool = skip_bad_flag(),
        dev_data: Optional[Path] = typer.Option(None, "--dev-data", help="Held-out questions (same format as --data) answered greedily every --dev-every steps and at steps 0 and last: OUT/dev_log.jsonl, OUT/grpo_dev.png."),
        dev_limit: Optional[int] = typer.Option(None, "--dev-limit", help="Only the first N questions of --dev-data."),
        dev_every: int = typer.Option(5, "--dev-every", help="Check --dev-data every N steps (default 5; a multiple of --save-every resumes a killed check from its own checkpoint)."),
        progress: bool = progress_flag(),
    ) -> None:
        """Stage II by GRPO: sampled deeprag narratives per question, rewarded for a correct answer with few retrievals."""
        with user_errors():
            from dynrag.deeprag.grpo import GrpoJobOptions
            from dynrag.run.jobs import JOBS
            from dynrag.deeprag.grpo_dev import load_dev_check
            from dynrag.registry import parse_pairs
            from dynrag.retrieval.factory import given_options

            options = train_options(option, "grpo", recipe, group=group, temperature=temperature, top_p=top_p, beta=beta,
                                    entropy_coef=entropy_coef, kl_clamp=kl_clamp, loss_average=loss_average, clip=clip,
                                    match=match, retrieval_cost=retrieval_cost, k=k, max_subqueries=max_subqueries,
                                    max_retrievals=max_retrievals,
                                    method=method, lr=lr, epochs=epochs, schedule=schedule, max_steps=max_steps,
                                    batch_size=batch_size, save_every=save_every, threads=threads)
            chosen = given_options(retriever, parse_pairs(retriever_option, "--retriever-option"), "--retriever-option")
            console = Console(stderr=True)
            dev = load_dev_check(dataset, dev_data, dev_limit, dev_every, console) if dev_data else None
            request = GrpoJobOptions(dataset=dataset, data=data, out=out, model=model, corpus=corpus, options=options,
                                     limit=limit, skip=skip, aliases=aliases, skip_bad=skip_bad, retriever=retriever,
                                     retriever_options=chosen, dev=dev)
            report = JOBS.open("train grpo", request, console=console, progress=progress)
            sys.stdout.write(json.dumps(report, indent=2) + "\n")

    @train.command("reader")
    def reader_command(
        dataset: str = dataset_flag(...),
        data: list[Path] = data_flag(..., role="Training questions with gold passages (repeatable; never those you evaluate on)"),
        context: str = typer.Option("gr", "--context", help="g: gold passages | r: one random passage | gr: gold then random (the paper's best) | gg: gold twice."),
        order: str = typer.Option("gold_first", "--order", help="gold_first: the context's own order (the paper's) | shuffled: a seeded order per question."),
        out: Path = typer.Option(..., "--out", help="Output HF directory, adapters merged: --model hf:OUT (resumed when a run was interrupted)."),
        model: str = model_flag("bundled", role="Model to fine-tune"),
        exemplars: str = exemplars_flag("default"),
        limit: Optional[int] = limit_flag(),
        method: Optional[str] = typer.Option(None, "--method", help="lora (default) | full | auto (lora above ~1B parameters)"),
        lr: Optional[float] = typer.Option(None, "--lr", help="Learning rate (default 2e-4 LoRA, 1e-5 full)."),
        epochs: Optional[int] = typer.Option(None, "--epochs", help="Passes over the questions (default 1)."),
        schedule: Optional[str] = typer.Option(None, "--schedule", help=SCHEDULE_HELP),
        max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Stop after N optimizer steps."),
        batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Questions per step (default 4)."),
        save_every: Optional[int] = typer.Option(None, "--save-every", help="Checkpoint every N steps (default 50)."),
        threads: Optional[int] = typer.Option(None, "--threads", help="torch CPU threads."),
        option: list[str] = typer.Option([], "--option", help="Other training option KEY=VALUE, as for imitation."),
        progress: bool = progress_flag(),
    ) -> None:
        """Generator fine-tuning (RAG best practices): answer-only loss with gold, random or mixed passages."""
        with user_errors():
            from dynrag.training.finetune import FineTune
            from dynrag.training.reader_examples import check_context, check_order
            from dynrag.training.reader_train import FineTuneReaderJobOptions
            from dynrag.run.jobs import JOBS

            check_context(context)
            check_order(order)
            options = train_options(option, method=method or FineTune.LORA, lr=lr, epochs=epochs, max_steps=max_steps,
                                    schedule=schedule, batch_size=batch_size, save_every=save_every, threads=threads)
            req = FineTuneReaderJobOptions(dataset=dataset, data=list(data), out=out, context=context, model=model,
                                           exemplars=exemplars, limit=limit, options=options, order=order)
            report = JOBS.open("train reader", req, console=Console(stderr=True), progress=progress)
            sys.stdout.write(json.dumps(report, indent=2) + "\n")
