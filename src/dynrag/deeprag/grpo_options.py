"""GRPO's options and its named recipes (`dynrag train grpo --recipe NAME`).

The defaults of `GrpoOptions` are the authors' recipe, the `authors` entry, which changes none
of them. `cpu-small` is the smaller run this project trained with before: fewer rollouts and
questions per step, a 40x stronger KL pull, a cosine rate, no nucleus cut, no entropy bonus, and
each rollout's loss averaged over its own tokens. A flag or `--option` given on the command line
wins over the recipe's value.

The most sub-questions and retrievals of a rollout are not part of either recipe: they are the
dataset's DeepRAG limits (its registry entry), the ones its data was searched and its models
are evaluated under; `settle_limits` writes them into the options before the run records them.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

from pydantic import Field

from dynrag.datasets.formats.registry import Dataset, DeepRAGLimits
from dynrag.deeprag.rewards import RewardOptions
from dynrag.registry import Registry, parse_model
from dynrag.training.trainer import TrainOptions


class GrpoOptions(TrainOptions, RewardOptions):
    """Training options (trainer.py; batch_size is the questions per step) and the reward's
    (rewards.py), and GRPO's own. The defaults are the authors' recipe."""

    # Every rollout of the step is backpropagated on its own and the gradients add up before the
    # one optimizer step: 32 questions fit on a CPU as gradient accumulation.
    batch_size: int = Field(32, ge=1, description="training questions per optimizer step")
    schedule: Literal["constant", "cosine"] = Field("constant", description="learning rate after the warm-up")
    save_every: int = Field(5, ge=1, description="checkpoint every N steps (rollouts are kept apart: never sampled twice)")
    group: int = Field(8, ge=2, description="G: narratives sampled per question")
    temperature: float = Field(1.0, gt=0, description="sampling temperature of the rollouts")
    top_p: float = Field(0.95, gt=0, le=1, description="nucleus sampling: most likely tokens up to this mass")
    beta: float = Field(0.001, ge=0, description="weight of the KL penalty to the stage-I model (0: none, no reference pass)")
    kl_clamp: float | None = Field(10.0, gt=0, description="each token's KL estimate is clamped to +-this (None: unclamped)")
    entropy_coef: float = Field(0.001, ge=0, description="weight of the entropy bonus on learned tokens (0: none)")
    loss_average: Literal["token", "rollout"] = Field(
        "token", description="token: the step's loss is the mean over all its learned tokens (a long rollout weighs "
        "more); rollout: each rollout's mean, then the mean over rollouts")
    clip: float = Field(0.2, gt=0, lt=1, description="epsilon of the clipped ratio")
    k: int = Field(3, ge=1, description="passages per retrieval")
    max_subqueries: int | None = Field(None, ge=1, le=20, description="most sub-questions per narrative (default: the dataset's DeepRAG limit)")
    max_retrievals: int | None = Field(None, ge=0, description="most retrievals per narrative (default: the dataset's DeepRAG limit)")
    max_new_tokens: int = Field(256, ge=8, description="generated-token budget of a narrative")
    shots: int | None = Field(None, ge=0, description="worked examples in the prompt (default: as the model was trained)")


GRPO_RECIPES: Registry[dict[str, Any]] = Registry("GRPO recipe")

GRPO_RECIPES.add("authors", lambda _: {}, summary="the authors' training script (default): group 8, 32 questions per "
                 "step, KL 0.001 clamped to +-10, constant rate, top-p 0.95, entropy bonus 0.001, per-token loss")
# What `dynrag train grpo` ran with before the authors' recipe became the default: a step is 16
# rollouts instead of 256, which two CPU cores finish in minutes.
CPU_SMALL = {"group": 4, "batch_size": 4, "beta": 0.04, "kl_clamp": None, "schedule": "cosine", "top_p": 1.0,
             "entropy_coef": 0.0, "loss_average": "rollout"}
GRPO_RECIPES.add("cpu-small", lambda _: dict(CPU_SMALL), summary="small steps for two CPU cores: group 4, 4 questions "
                 "per step, KL 0.04 unclamped, cosine rate, no top-p, no entropy bonus, per-rollout loss")


def grpo_options(recipe: str, values: Mapping[str, Any], where: str = "training") -> GrpoOptions:
    """The options of `recipe` with `values` (flags, --option pairs) over them; unknown keys and
    recipes are errors."""
    return parse_model(GrpoOptions, {**GRPO_RECIPES.open(recipe), **values}, where)


def rollout_limits(options: GrpoOptions, dataset: Dataset) -> DeepRAGLimits:
    """The step and retrieval limits of the rollouts: the dataset's, unless the options set them."""
    return DeepRAGLimits(
        max_retrievals=dataset.deeprag.max_retrievals if options.max_retrievals is None else options.max_retrievals,
        max_steps=dataset.deeprag.max_steps if options.max_subqueries is None else options.max_subqueries,
    )


def settle_limits(options: GrpoOptions, dataset: Dataset) -> GrpoOptions:
    """The options with the rollouts' limits written in: what the run records and resumes under."""
    limits = rollout_limits(options, dataset)
    return options.model_copy(update={"max_subqueries": limits.max_steps, "max_retrievals": limits.max_retrievals})
