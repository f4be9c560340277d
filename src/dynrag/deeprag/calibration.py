"""`dynrag train calibration` (stage II): chain of calibration.

1. Search again with the stage-I model (as target, and as teacher unless told otherwise) on
   further questions: OUT/synth/ (a synth directory, resumable).
2. Preference pairs, by `--pairs` (pairs.py; default optimal: one per step of each optimal
   narrative, marker against marker): OUT/pairs.jsonl; a fixed share of questions is held out to
   measure on. The mode sets what the search keeps (synth `keep`), so it is part of OUT/synth's
   manifest: resuming with another mode is an error.
3. The frozen stage-I model's log-probabilities of both sides, computed once: OUT/reference.jsonl
   (one fsynced line per pair; a rerun computes only the missing ones). Nothing else needs the
   reference model, so it is never held in memory beside the policy.
4. DPO against it (losses.dpo_loss, beta 0.4), resumable like imitation (trainer.py).
5. The share of pairs whose chosen side the model prefers (log P(chosen) > log P(rejected)),
   before (the stage-I model) and after, on the training and the held-out pairs:
   OUT/calibration.json, and in deeprag.json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from pydantic import Field
from rich.console import Console

from dynrag.training.finetune import FineTune
from dynrag.training.supervised import attach_method, finish
from dynrag.training.losses import completion_logprobs, dpo_loss
from dynrag.training.models import is_complete, load_trainable, read_meta
from dynrag.deeprag.examples import narrative_style, training_narrative
from dynrag.deeprag.pairs import SYNTH_KEEP, PreferencePair, build_pairs, check_pair_mode, pair_masks, tokenize_pair
from dynrag.deeprag.synth import Models, SynthJobOptions, run_synth
from dynrag.training.trainer import (
    TrainOptions,
    describe_schedule,
    identity_options,
    model_device,
    pin_threads,
    plan_batches,
    schedule_meta,
    settle_method,
    train_loop,
)
from dynrag.deeprag.trajectory import read_trajectories
from dynrag.errors import ConfigError, DataError
from dynrag.lm.device import autocast
from dynrag.lm.loader import resolve_model
from dynrag.io.files import atomic_write_json, atomic_write_text
from dynrag.io.jsonl import JsonlAppender, json_line, read_jsonl
from dynrag.io.lock import DirectoryLock
from dynrag.progress import progress_bar
from dynrag.run.jobs import JOBS, JobTraits, OutputGroup

PAIRS, REFERENCE, REPORT = "pairs.jsonl", "reference.jsonl", "calibration.json"
# The authors' DPO rate for 7-8B models; LoRA's usual rate is far higher.
DEFAULT_LR = {FineTune.FULL: 5e-7, FineTune.LORA: 5e-5}


class CalibrationOptions(TrainOptions):
    """Stage II's training options: as stage I's, but 8 passes over the pairs by default, as in the
    authors' stage-II recipe (with its cosine schedule and 10% warm-up, the shared defaults)."""

    epochs: int = Field(8, ge=1)


class CalibrationJobOptions(OutputGroup):
    """The `train calibration` job's options: the search with the stage-I model (its ``model``) and
    the DPO on the pairs it yields."""

    # Its `out` is ignored: the search goes to OUT/synth.
    synth: SynthJobOptions = Field(description="the search with the stage-I model, as `synth` runs it")
    beta: float = Field(0.4, description="DPO beta")
    heldout: float = Field(0.1, description="share of questions whose pairs are kept out of training")
    options: TrainOptions = Field(default_factory=CalibrationOptions, description="the training recipe")
    pairs: str = Field("optimal", description="optimal | all-nodes | sentence-order | response (pairs.py)")


def preference_share(chosen: list[float], rejected: list[float]) -> float | None:
    """The share of pairs whose chosen side has the higher log-probability."""
    return round(sum(c > r for c, r in zip(chosen, rejected)) / len(chosen), 4) if chosen else None


def score_pairs(model: Any, tokenized: list[tuple[list[int], list[int], list[int]]], indices: list[int],
                console: Console, progress: bool, description: str, sink=None,
                masks: list[Any] | None = None) -> dict[int, tuple[float, float]]:
    """log P(chosen), log P(rejected) of each pair under `model` (no gradients)."""
    out: dict[int, tuple[float, float]] = {}
    model.eval()
    with torch.no_grad(), progress_bar(description, len(indices), 0, console, progress, unit="pairs") as bar:
        for i in indices:
            prompt, chosen, rejected = tokenized[i]
            lp = completion_logprobs(model, prompt, [chosen, rejected], masks[i] if masks else None)
            out[i] = (float(lp[0]), float(lp[1]))
            if sink is not None:
                sink(i, out[i])
            bar.advance()
    model.train()
    return out


def shares(pairs: list[PreferencePair], scores: dict[int, tuple[float, float]]) -> dict[str, float | None]:
    result = {}
    for split in ("train", "heldout"):
        idx = [i for i, p in enumerate(pairs) if p.split == split]
        result[split] = preference_share([scores[i][0] for i in idx], [scores[i][1] for i in idx])
    return result


def run_calibration(req: CalibrationJobOptions, *, console: Console | None = None, progress: bool = True,
                    search_models: Models | None = None) -> dict[str, Any]:
    """Run (or resume) stage II; `search_models` replaces what the search would load (tests)."""
    console = console or Console(stderr=True)
    out, options = Path(req.out), req.options
    if req.beta <= 0:
        raise ConfigError(f"--beta must be positive (got {req.beta})")
    if not 0 <= req.heldout < 1:
        raise ConfigError(f"--heldout must be in [0, 1) (got {req.heldout})")
    mode = check_pair_mode(req.pairs)
    if is_complete(out):
        console.print(f"{out} already holds a finished checkpoint; nothing to do (use another --out to train again)")
        return read_meta(out)
    pin_threads(options)
    stage_one = req.synth.model
    with DirectoryLock(out, "training directory"):
        _check_mode_unchanged(out, mode)
        search = req.synth.model_copy(update={"out": out / "synth", "select": "min", "keep": SYNTH_KEEP[mode]})
        synth = run_synth(search, console=console, progress=progress, models=search_models)
        console.print(f"search with {stage_one}: {synth['found']} of {synth['questions']} questions with a correct narrative")
        trajectories = read_trajectories(out / "synth")
        style = narrative_style(trajectories, str(out / "synth"))
        # A chat-framed narrative needs the model's template, so the model loads first then.
        loaded = load_trainable(stage_one, progress=progress) if style == "chat" else None
        narrative = training_narrative(loaded[1] if loaded else None, style)
        pairs = build_pairs(trajectories, narrative, heldout=req.heldout, mode=mode)
        if not [p for p in pairs if p.split == "train"]:
            raise DataError(str(out / "synth"), "no preference pairs to train on (no question had a correct narrative)")
        atomic_write_text(out / PAIRS, "".join(json_line(p.to_dict()) for p in pairs))
        model, tokenizer, source = loaded or load_trainable(stage_one, progress=progress)
        options = settle_method(options, model)
        device = model_device(model)
        tokenized = [tokenize_pair(tokenizer, p) for p in pairs]
        masks = [pair_masks(tokenizer, p) for p in pairs]
        reference = _reference_scores(model, pairs, tokenized, out, console, progress, masks)
        before = shares(pairs, reference)
        train_idx = [i for i, p in enumerate(pairs) if p.split == "train"]
        params = attach_method(model, options)
        lr = options.lr or DEFAULT_LR[options.method]
        lengths = [len(tokenized[i][0]) for i in train_idx]
        batches = [[train_idx[j] for j in b] for b in plan_batches(lengths, options.batch_size, options.epochs, options.seed)]
        batches = batches[: options.max_steps] if options.max_steps else batches

        def step(batch: list[int]) -> dict[str, float]:
            losses, margins, tokens = [], [], 0
            for i in batch:
                prompt, chosen, rejected = tokenized[i]
                with autocast(str(device)):  # bf16 on CUDA; a no-op on the CPU
                    lp = completion_logprobs(model, prompt, [chosen, rejected], masks[i]).float()
                ref = torch.tensor(reference[i], device=device)
                loss, margin = dpo_loss(lp[0], lp[1], ref[0], ref[1], req.beta)
                (loss / len(batch)).backward()  # one graph at a time: the same gradient, less memory
                losses.append(float(loss.detach()))
                margins.append(float(margin.detach()))
                tokens += len(prompt) + len(chosen) + len(rejected)
            return {"loss": sum(losses) / len(batch), "margin": sum(margins) / len(batch),
                    "reward_accuracy": sum(m > 0 for m in margins) / len(batch), "tokens": float(tokens)}

        identity = {"pairs": [p.id for p in pairs], "model": resolve_model(stage_one), "beta": req.beta,
                    "options": identity_options(options)}
        if mode != "optimal":  # optimal and response pairs share ids; runs from before the modes stay resumable
            identity["pairs_mode"] = mode
        console.print(f"calibration ({mode} pairs): {len(train_idx)} training pairs, {len(pairs) - len(train_idx)} held out, "
                      f"{len(batches)} steps, {options.method}, {describe_schedule(options, lr, len(batches))}, beta {req.beta}")
        records = train_loop(params=params, batches=batches, step_fn=step, options=options, lr=lr, out=out,
                             identity=identity, console=console, progress=progress, description="calibration")
        after = shares(pairs, score_pairs(model, tokenized, list(range(len(pairs))), console, progress, "after",
                                          masks=masks))
        report = {
            "pairs": {"mode": mode, "train": len(train_idx), "heldout": len(pairs) - len(train_idx),
                      "retrieve_chosen": sum(p.chosen_decision == "retrieve" for p in pairs)},
            "prefers_chosen_before": before,
            "prefers_chosen_after": after,
            "beta": req.beta,
            "synth": synth,
        }
        atomic_write_json(out / REPORT, report)
        meta = {"stage": "calibration", "base_model": resolve_model(stage_one), "base_source": source, "lr": lr,
                "lr_schedule": schedule_meta(options, lr, len(batches)), **report}
        return finish(model, tokenizer, out, options, records, meta, {"shots": 0, "style": style})


def _check_mode_unchanged(out: Path, mode: str) -> None:
    """A resumed OUT must go on with the pair mode it was started with."""
    path = out / "synth" / "manifest.json"
    if not path.exists():
        return
    kept = json.loads(path.read_text(encoding="utf-8")).get("keep", "path")
    if kept != SYNTH_KEEP[mode]:
        started = [m for m, k in SYNTH_KEEP.items() if k == kept]
        raise ConfigError(f"{out} was started with --pairs {' or '.join(started)}, not --pairs {mode}; "
                          "use another --out for another pair mode, or the same --pairs to resume")


def _reference_scores(model, pairs, tokenized, out: Path, console: Console, progress: bool,
                      masks: list[Any] | None = None) -> dict[int, tuple[float, float]]:
    """The frozen stage-I log-probabilities, read from OUT/reference.jsonl where already computed."""
    index = {p.id: i for i, p in enumerate(pairs)}
    scores = {index[r["id"]]: (r["chosen"], r["rejected"]) for r in read_jsonl(out / REFERENCE, repair=True) if r["id"] in index}
    missing = [i for i in range(len(pairs)) if i not in scores]
    if missing:
        with JsonlAppender(out / REFERENCE) as sink:
            scores.update(score_pairs(model, tokenized, missing, console, progress, "reference",
                                      lambda i, s: sink.append({"id": pairs[i].id, "chosen": s[0], "rejected": s[1]}),
                                      masks))
    return scores


def read_report(out: Path) -> dict[str, Any]:
    return json.loads((Path(out) / REPORT).read_text(encoding="utf-8"))


JOBS.add("train calibration", run_calibration, CalibrationJobOptions,
         summary="stage II: search again with the stage-I model, preference pairs, DPO",
         traits=JobTraits(lock="out", loop="own"))
