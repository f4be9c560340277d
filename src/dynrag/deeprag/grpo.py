"""`dynrag train grpo` (stage II by reinforcement learning): GRPO from the stage-I model.

Each optimizer step takes `batch_size` training questions; for each, G narratives are sampled
from the current policy by the deeprag method itself (rollout.py: retrieval inside the rollout),
rewarded (rewards.py: correctness, then fewer retrievals), and their rewards normalised within
the group into advantages. The loss is GRPO's clipped ratio objective per learned token with a
KL penalty to the frozen stage-I model and an entropy bonus (losses.grpo_token_losses), averaged
over the step's learned tokens or per rollout (losses.loss_weights), passages never scored. Each
rollout is backpropagated on its own, weighted so the gradients add up to the step's: a step of
32 questions x 8 rollouts is gradient accumulation, one optimizer step. The defaults and the
named recipes are in grpo_options.py; a rollout's step and retrieval limits are the dataset's.

    OUT/grpo_run.json     what the rollouts are sampled with (a rerun with other settings is refused)
    OUT/rollouts.jsonl    every (step, question)'s group of rollouts, sampled once (rollout.py)
    OUT/train_log.jsonl   one line per step: loss, reward, em, f1, retrievals per question, kl, ...
    OUT/grpo.png          F1 and retrievals per question over the steps; OUT/loss.png the loss
    OUT/dev_log.jsonl     with a dev check (grpo_dev.py): held-out questions answered greedily
                          every few steps; OUT/grpo_dev.png their F1 and retrievals per question
    OUT/checkpoint/       while training (trainer.py): a rerun after kill -9 resumes from it
    OUT/config.json, model.safetensors, tokenizer files, deeprag.json   the HF directory at the end

One gradient step is taken per batch of rollouts, so the ratio is 1 in value when the loss is
computed (its gradient is the policy gradient) and the clip cannot bind; it is kept so the
objective is GRPO's, term for term.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import torch
from pydantic import Field
from rich.console import Console

from dynrag.training.finetune import FineTune
from dynrag.training.supervised import attach_method, finish
from dynrag.training.examples import IGNORE
from dynrag.training.losses import grpo_token_losses, learned_logprobs, learned_logprobs_entropy, loss_weights
from dynrag.training.lora import lora_disabled
from dynrag.training.models import is_complete, load_trainable, read_meta
from dynrag.training.plot import plot_curves
from dynrag.deeprag.grpo_dev import DevCheck, DevLog, dev_summary, refuse_overlap
from dynrag.deeprag.grpo_options import GrpoOptions, settle_limits
from dynrag.deeprag.rewards import RewardOptions, group_advantages
from dynrag.deeprag.rollout import RolloutLog, sample_group
from dynrag.training.trainer import (describe_schedule, identity_options, model_device, pin_threads,
                                    plan_batches, schedule_meta, settle_method, train_loop)
from dynrag.errors import ConfigError, DataError
from dynrag.datasets.formats.registry import Dataset, dataset_spec
from dynrag.datasets.examples import QAExample
from dynrag.datasets.loaders import load_aliases
from dynrag.eval.steps import corpus_index, load_questions
from dynrag.io.files import atomic_write_json, read_json
from dynrag.io.lock import DirectoryLock
from dynrag.lm.device import autocast
from dynrag.lm.loader import resolve_model
from dynrag.lm.row_decode import Sampling
from dynrag.methods.deeprag.narrative import load_exemplars
from dynrag.retrieval.base import Retriever
from dynrag.run.checks import check_aliases, check_corpus, check_data_file
from dynrag.run.jobs import JOBS, JobTraits, OutputGroup, QuestionsGroup, SearchGroup

# GRPO moves a model far with few steps: rates well below the imitation stage's (1e-6: the authors').
DEFAULT_LR = {FineTune.FULL: 1e-6, FineTune.LORA: 1e-5}
RUN_FILE = "grpo_run.json"


class GrpoJobOptions(QuestionsGroup, SearchGroup, OutputGroup):
    """The `train grpo` job's options: the shared groups and the training recipe. ``model`` is the
    stage-I checkpoint, required (the policy's start and the KL reference)."""

    model: str = Field(description="the stage-I model: the policy's start and the frozen KL reference")
    options: GrpoOptions = Field(default_factory=GrpoOptions, description="the training recipe")
    # Held-out questions checked every few steps (not part of the run's identity).
    dev: DevCheck | None = Field(None, description="held-out questions checked every few steps")


def reward_options(options: GrpoOptions) -> RewardOptions:
    return RewardOptions(**{k: getattr(options, k) for k in RewardOptions.model_fields})


def load_training_questions(req: GrpoJobOptions, console: Console) -> tuple[list[QAExample], Dataset]:
    spec = dataset_spec(req.dataset)
    check_aliases(req.aliases, spec.name)
    check_corpus(req.corpus)
    data = check_data_file(Path(req.data), spec.name)
    if req.limit is not None and req.limit < 1:
        raise ConfigError(f"--limit must be at least 1 (got {req.limit})")
    if req.skip < 0:
        raise ConfigError(f"--skip must be 0 or more (got {req.skip})")
    if req.options.shots is not None and req.options.shots > len(load_exemplars()):
        raise ConfigError(f"--shots must be between 0 and {len(load_exemplars())} (got {req.options.shots})")
    aliases = load_aliases(Path(req.aliases)) if req.aliases else None
    wanted = None if req.limit is None else req.skip + req.limit
    examples, _ = load_questions(spec.name, data, console, aliases=aliases, skip_bad=req.skip_bad, limit=wanted)
    examples = examples[req.skip :]
    if not examples:
        raise DataError(str(data), f"no questions to train on (after --skip {req.skip})")
    return examples, spec


def open_retriever(req: GrpoJobOptions, examples: list[QAExample], console: Console, progress: bool) -> Retriever:
    from dynrag.run.assemble import open_plan_retriever
    from dynrag.run.plan import search_retriever

    index = corpus_index(req.corpus, Path(req.out), examples, console, progress)
    return open_plan_retriever(search_retriever(req.retriever, req.retriever_options), index, work_dir=Path(req.out),
                               progress=progress)


def questions_fingerprint(examples: list[QAExample]) -> str:
    digest = hashlib.sha256()
    for ex in examples:
        digest.update(json.dumps([ex.id, ex.question, ex.answers]).encode())
    return digest.hexdigest()


def run_grpo(req: GrpoJobOptions, *, console: Console | None = None, progress: bool = True,
             retriever: Retriever | None = None) -> dict[str, Any]:
    """Run (or resume) GRPO; `retriever` replaces the one built from --corpus (tests)."""
    console = console or Console(stderr=True)
    out = Path(req.out)
    examples, spec = load_training_questions(req, console)  # bad input fails before the model loads
    if req.dev:
        refuse_overlap(req.dev, examples)
    options = settle_limits(req.options, spec)
    if is_complete(out):
        console.print(f"{out} already holds a finished checkpoint; nothing to do (use another --out to train again)")
        return read_meta(out)
    pin_threads(options)
    with DirectoryLock(out, "training directory"):
        retriever = retriever or open_retriever(req, examples, console, progress)
        model, tokenizer, source = load_trainable(req.model, progress=progress)
        options = settle_method(options, model)
        reference = None
        if options.beta > 0 and options.method == FineTune.FULL:  # LoRA's reference is its base: adapters switched off
            reference = copy.deepcopy(model).eval().requires_grad_(False)
        params = attach_method(model, options)
        policy = Policy(req.model, model, tokenizer, reference, retriever, options, spec.yes_no)
        lr = options.lr or DEFAULT_LR[options.method]
        per_step = min(options.batch_size, len(examples))
        plan = plan_batches([len(ex.question) for ex in examples], per_step, options.epochs, options.seed)
        plan = plan[: options.max_steps] if options.max_steps else plan
        # The trainer hands each step its batch; a batch entry is a slot (step * per_step + j), so the
        # step knows its own number (the rollouts' key and seeds).
        slots = {s * per_step + j: q for s, batch in enumerate(plan) for j, q in enumerate(batch)}
        batches = [[s * per_step + j for j in range(len(batch))] for s, batch in enumerate(plan)]
        from dynrag.run.plan import search_retriever

        searched = search_retriever(req.retriever, req.retriever_options)
        identity = {"questions": questions_fingerprint(examples), "model": resolve_model(req.model),
                    "corpus": req.corpus, "retriever": [searched.name, searched.options],
                    "options": identity_options(options)}
        claim_run(out, identity)  # before any rollout is read back: they belong to this run's settings
        log = RolloutLog(out)
        dev_log = DevLog(out, req.dev) if req.dev else None
        after_step = (lambda taken: dev_log.after_step(taken, len(batches), policy)) if dev_log else None

        def step(batch: list[int]) -> dict[str, float]:
            number = batch[0] // per_step
            return policy.step(log, number, [examples[slots[s]] for s in batch])

        console.print(f"grpo: {len(examples)} questions, {len(batches)} steps of {per_step} questions x {options.group} "
                      f"rollouts, {options.method}, {describe_schedule(options, lr, len(batches))}, beta {options.beta}, "
                      f"top-p {options.top_p}, entropy {options.entropy_coef}, loss per {options.loss_average}, "
                      f"at most {options.max_subqueries} sub-questions and {options.max_retrievals} retrievals")
        try:
            records = train_loop(params=params, batches=batches, step_fn=step, options=options, lr=lr, out=out,
                                 identity=identity, console=console, progress=progress, description="grpo",
                                 after_step=after_step)
        finally:
            log.close()
        plot_curves(records, out / "grpo.png", f"grpo ({options.method}, {resolve_model(req.model)})",
                    [("f1", "F1 (mean of rollouts)"), ("retrievals", "retrievals per question")])
        meta = {"stage": "grpo", "base_model": resolve_model(req.model), "base_source": source, "lr": lr,
                "lr_schedule": schedule_meta(options, lr, len(batches)), "questions": len(examples),
                "final_reward": records[-1]["reward"] if records else None}
        if dev_log:
            dev_log.plot(f"grpo on held-out questions ({options.method}, {resolve_model(req.model)})")
            meta["dev"] = [dev_summary(r) for r in sorted(dev_log.records.values(), key=lambda r: r["step"])]
        return finish(model, tokenizer, out, options, records, meta, {"shots": policy.method.narrative.shots,
                                                                        "style": policy.method.narrative.style})


def claim_run(out: Path, identity: dict[str, Any]) -> None:
    """OUT/grpo_run.json records what the rollouts in OUT were sampled with; a rerun with other
    questions, model or options is refused (even before the first checkpoint)."""
    path = out / RUN_FILE
    if path.exists():
        before = read_json(path, "GRPO run record")
        differs = sorted(k for k in identity if before.get(k) != identity[k])
        differs += sorted(f"option {k}" for k in identity["options"] if before.get("options", {}).get(k) != identity["options"][k])
        differs = [d for d in differs if d != "options"]
        if differs:
            raise ConfigError(f"{out} holds a GRPO run with different {', '.join(differs)}; use another --out, "
                              "or the same data and options to resume")
        return
    atomic_write_json(path, identity)


def learned_count(labels: list[int]) -> int:
    """Learned tokens of a sequence as the loss scores them: each position's next token."""
    return sum(label != IGNORE for label in labels[1:])


class Policy:
    """The model being trained, as the deeprag method that samples the rollouts, and the step."""

    def __init__(self, spec: str, model: Any, tokenizer: Any, reference: Any, retriever: Retriever,
                 options: GrpoOptions, yes_no: bool):
        from dynrag.lm.hf import HFLanguageModel
        from dynrag.methods.deeprag.method import DeepRag, DeepRagOptions

        self.model, self.tokenizer, self.reference, self.options, self.yes_no = model, tokenizer, reference, options, yes_no
        self.device = model_device(model)
        self.lm = HFLanguageModel(model, tokenizer, name=spec)
        method_options = DeepRagOptions(k=options.k, max_steps=options.max_subqueries, max_retrievals=options.max_retrievals,
                                        max_new_tokens=options.max_new_tokens, shots=options.shots)
        self.method = DeepRag(self.lm, None, method_options, retriever)
        self.rewards = reward_options(options)
        self.sampling = Sampling(options.temperature, options.top_p, options.seed)

    def rollouts(self, log: RolloutLog, number: int, questions: list[QAExample]) -> tuple[list[list[Any]], int]:
        groups, sampled = [], 0
        self.model.eval()
        self.lm.forget_caches()  # the weights changed since the last step's rollouts
        try:
            for ex in questions:
                group, new = log.group(number, ex.id, lambda ex=ex: sample_group(
                    self.method, self.lm, self.tokenizer, ex, number, self.options.group, self.sampling, self.rewards,
                    self.yes_no))
                groups.append(group)
                sampled += new
        finally:
            self.model.train()
        return groups, sampled

    def reference_logprobs(self, ids: list[int], labels: list[int]) -> torch.Tensor:
        with torch.no_grad(), autocast(str(self.device)):
            if self.reference is not None:
                return learned_logprobs(self.reference, ids, labels).float()
            with lora_disabled(self.model):
                return learned_logprobs(self.model, ids, labels).float()

    def step(self, log: RolloutLog, number: int, questions: list[QAExample]) -> dict[str, float]:
        opts = self.options
        started = time.perf_counter()
        groups, sampled = self.rollouts(log, number, questions)
        rollout_seconds = time.perf_counter() - started
        scored = [(r, a) for g in groups for r, a in zip(g, group_advantages([r.reward for r in g]))]
        kept = [(r, a) for r, a in scored if len(r.input_ids) <= opts.max_tokens]
        weights = loss_weights([learned_count(r.labels) for r, _ in kept], opts.loss_average)
        loss_total, kls, entropies, tokens = 0.0, [], [], 0
        for (rollout, advantage), weight in zip(kept, weights):
            if advantage == 0 and opts.beta == 0 and opts.entropy_coef == 0:
                continue  # no gradient from it (its tokens still count in a per-token average)
            ids, labels = list(rollout.input_ids), rollout.labels
            with autocast(str(self.device)):  # bf16 on CUDA; a no-op on the CPU
                if opts.entropy_coef:
                    logp, entropy = learned_logprobs_entropy(self.model, ids, labels)
                    logp, entropy = logp.float(), entropy.float()
                else:
                    logp, entropy = learned_logprobs(self.model, ids, labels).float(), None
            ref = self.reference_logprobs(ids, labels) if opts.beta > 0 else logp.detach()
            per_token, kl = grpo_token_losses(logp, logp.detach(), ref, advantage, opts.clip, opts.beta, entropy=entropy,
                                              entropy_coef=opts.entropy_coef, kl_bound=opts.kl_clamp)
            loss = per_token.sum() * weight
            loss.backward()  # one rollout's graph at a time: the step's gradient, accumulated, less memory
            loss_total += float(loss.detach())
            kls.append(float(kl.detach().mean()))
            if entropy is not None:
                entropies.append(float(entropy.detach().mean()))
            tokens += len(ids)
        rollouts = [r for g in groups for r in g]
        n = len(rollouts)
        return {
            "loss": loss_total,
            "reward": sum(r.reward for r in rollouts) / n,
            "em": sum(r.em for r in rollouts) / n,
            "f1": sum(r.f1 for r in rollouts) / n,
            "retrievals": sum(r.retrievals for r in rollouts) / n,
            "wrote_final": sum(r.wrote_final for r in rollouts) / n,
            "kl": sum(kls) / len(kls) if kls else 0.0,
            "entropy": sum(entropies) / len(entropies) if entropies else 0.0,
            "left_out_long": float(len(scored) - len(kept)),
            "groups_sampled": float(sampled),
            "rollout_seconds": rollout_seconds,  # sampling (or reading back) the groups; the rest is the loss
            "tokens": float(tokens),
        }


JOBS.add("train grpo", run_grpo, GrpoJobOptions, summary="GRPO from the stage-I model, with rewards for correct, cheap narratives",
         traits=JobTraits(lock="out", loop="own"))
