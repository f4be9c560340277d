"""GRPO's recipes: the defaults are the authors' training script, setting by setting; `cpu-small`
keeps the earlier small steps; flags win. And the pieces the authors' recipe added to the loss,
checked against values worked out by hand on tiny tensors."""

import math

import pytest
import torch

from dynrag.datasets.formats.registry import dataset_spec
from dynrag.deeprag.grpo import DEFAULT_LR
from dynrag.deeprag.grpo_options import GRPO_RECIPES, GrpoOptions, grpo_options, rollout_limits
from dynrag.deeprag.rewards import rollout_reward
from dynrag.errors import ConfigError
from dynrag.training.losses import (average_token_losses, grpo_token_losses, kl_estimates, loss_weights,
                                    token_entropy)
from dynrag.training.trainer import learning_rate, warmup_of

# The authors' GRPO settings, as their training script has them.
AUTHORS = {
    "group": 8,                 # rollouts per question
    "batch_size": 32,           # questions per optimizer step
    "beta": 0.001,              # KL weight
    "schedule": "constant",     # after the warm-up
    "top_p": 0.95,
    "entropy_coef": 0.001,
    "loss_average": "token",
    "kl_clamp": 10.0,
    "clip": 0.2,
    "temperature": 1.0,
}


def test_the_defaults_are_the_authors_recipe():
    default = GrpoOptions()
    assert grpo_options("authors", {}) == default
    assert {k: getattr(default, k) for k in AUTHORS} == AUTHORS
    assert DEFAULT_LR["full"] == 1e-6
    # one optimizer update per batch of rollouts: the trainer steps once per batch, and the rate
    # stays at its base after the warm-up
    total = 20
    warm = warmup_of(default, total)
    assert [learning_rate(s, 1e-6, warm, total, default.schedule) for s in range(warm, total)] == [1e-6] * (total - warm)
    # up to 8 turns: the rollouts take the dataset's limits, which leave room for at least that many
    # sub-questions on every multi-hop set but HotpotQA (two hops; the authors' depth there is 6)
    assert rollout_limits(default, dataset_spec("2wikimultihopqa")).max_steps >= 8
    assert rollout_limits(default, dataset_spec("hotpotqa")).max_steps == 6
    # the reward: 1 - 0.1 * min(retrievals, 5) when correct, 0.1 when wrong but well formed, else 0
    assert [rollout_reward(1.0, 1.0, r, True, default) for r in (0, 3, 5, 9)] == pytest.approx([1.0, 0.7, 0.5, 0.5])
    assert rollout_reward(0.0, 0.3, 2, True, default) == pytest.approx(0.1)
    assert rollout_reward(0.0, 0.3, 2, False, default) == 0.0


def test_cpu_small_keeps_the_earlier_values_and_a_flag_wins_over_either_recipe():
    small = grpo_options("cpu-small", {})
    assert (small.group, small.batch_size, small.beta, small.schedule, small.top_p, small.entropy_coef,
            small.loss_average, small.kl_clamp) == (4, 4, 0.04, "cosine", 1.0, 0.0, "rollout", None)
    assert (small.clip, small.temperature, small.max_subqueries) == (0.2, 1.0, None)  # limits: the dataset's
    assert grpo_options("cpu-small", {"group": 6}).group == 6
    assert grpo_options("authors", {"beta": "0.04", "loss_average": "rollout"}).beta == 0.04
    assert GRPO_RECIPES.names() == ["authors", "cpu-small"]
    with pytest.raises(ConfigError, match="unknown GRPO recipe 'big'"):
        grpo_options("big", {})
    with pytest.raises(ConfigError, match="bogus"):
        grpo_options("authors", {"bogus": 1})


def test_the_cli_takes_a_recipe_and_lists_the_choices(tmp_path):
    from dynrag.deeprag.train_cli import train_options

    assert train_options([], "grpo", "cpu-small", group=None).group == 4
    assert train_options(["entropy_coef=0"], "grpo", "authors", group=5).entropy_coef == 0.0
    with pytest.raises(ConfigError, match="authors, cpu-small"):
        train_options([], "grpo", "fast")


def test_token_entropy_of_uniform_and_certain_rows():
    logp = torch.log(torch.tensor([[0.25, 0.25, 0.25, 0.25], [0.5, 0.5, 1e-30, 1e-30]]))
    assert token_entropy(logp).tolist() == pytest.approx([math.log(4), math.log(2)], abs=1e-6)


def test_kl_estimates_are_clamped_and_stop_pulling_beyond_the_bound():
    logp = torch.tensor([math.log(0.3), math.log(0.3), math.log(1e-9)], requires_grad=True)
    ref = torch.tensor([math.log(0.6), math.log(0.3), math.log(0.5)])
    # ref/pi = 2: 2 - log 2 - 1; equal: 0; ref/pi = 5e8: far above 10, clamped
    free = kl_estimates(logp, ref).detach()
    assert free[:2].tolist() == pytest.approx([1 - math.log(2), 0.0]) and float(free[2]) > 1e8
    clamped = kl_estimates(logp, ref, 10.0)
    assert clamped.detach().tolist() == pytest.approx([1 - math.log(2), 0.0, 10.0])
    clamped.sum().backward()
    # d/dlogp (e^(ref-logp) - (ref-logp) - 1) = 1 - ref/pi = -1 for the first token; 0 once clamped
    assert logp.grad.tolist() == pytest.approx([-1.0, 0.0, 0.0])


def test_the_entropy_bonus_and_the_clamp_enter_the_token_loss():
    logp = torch.tensor([math.log(0.5), math.log(0.5)])
    entropy = torch.tensor([1.0, 2.0])
    # ratio 1, reference equal: loss = -(A - 0 + c H) = -(2 + 0.1 H)
    loss, _ = grpo_token_losses(logp, logp, logp, 2.0, 0.2, 0.5, entropy=entropy, entropy_coef=0.1)
    assert loss.tolist() == pytest.approx([-2.1, -2.2])
    far = logp + 30.0  # the reference finds each token e^30 times likelier: the KL is cut at 10
    loss, kl = grpo_token_losses(logp, logp, far, 0.0, 0.2, 0.5, kl_bound=10.0)
    assert kl.tolist() == pytest.approx([10.0, 10.0]) and loss.tolist() == pytest.approx([5.0, 5.0])


def test_per_token_and_per_rollout_averages():
    a, b = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([4.0])
    # per token: (1 + 2 + 3 + 4) / 4; per rollout: (mean(a) + mean(b)) / 2 = (2 + 4) / 2
    assert float(average_token_losses([a, b], "token")) == pytest.approx(2.5)
    assert float(average_token_losses([a, b], "rollout")) == pytest.approx(3.0)
    assert loss_weights([3, 1], "token") == pytest.approx([0.25, 0.25])
    assert loss_weights([3, 1, 0], "rollout") == pytest.approx([1 / 9, 1 / 3, 0.0])
    assert loss_weights([0, 0], "token") == [0.0, 0.0]
    with pytest.raises(ValueError):
        loss_weights([1], "sequence")
