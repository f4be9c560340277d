"""The reward of one rollout and the group-normalised advantages of GRPO (pure functions).

The paper's reward (DeepRAG §3.1) is -C(o) * T(s): minus the retrieval cost when the final
answer is correct, minus infinity when it is not. It orders narratives (correct before wrong,
then fewer retrievals first) but is unbounded; the authors' GRPO runs use a bounded form of the
same order, which is what `rollout_reward` computes:

    correct (EM):   1 - cost * min(retrievals, cost_cap)        (1, 0.9, ..., 0.5 with the defaults)
    wrong:          format_reward when the model wrote the final-answer line itself, else 0

With `match="f1"` the answer's token F1 replaces the 0/1 correctness:
reward = max(f1 * (1 - cost * min(retrievals, cost_cap)), format_reward if it wrote the final line).
"""

from __future__ import annotations

import math
from typing import Literal, Sequence

from pydantic import Field

from dynrag.registry import Options


class RewardOptions(Options):
    match: Literal["em", "f1"] = Field("em", description="answer correctness: exact match (0/1) or token F1")
    retrieval_cost: float = Field(0.1, ge=0, description="taken off a correct answer's reward per retrieval")
    cost_cap: int = Field(5, ge=0, description="retrievals beyond this many cost nothing more")
    format_reward: float = Field(0.1, ge=0, description="a wrong answer the model wrote itself (not asked for) gets this")


def rollout_reward(em: float, f1: float, retrievals: int, wrote_final: bool, options: RewardOptions) -> float:
    """The reward of one narrative (module docstring)."""
    score = em if options.match == "em" else f1
    discount = 1.0 - options.retrieval_cost * min(retrievals, options.cost_cap)
    earned = score * discount if score > 0 else 0.0
    return max(earned, options.format_reward if wrote_final else 0.0)


def group_advantages(rewards: Sequence[float], eps: float = 1e-4) -> list[float]:
    """GRPO's advantage of each rollout of one question: (r - mean) / (std + eps), the population
    standard deviation of the group; a group whose rewards are all equal gets zeros."""
    n = len(rewards)
    if n == 0 or max(rewards) == min(rewards):
        return [0.0] * n  # exactly: float noise must not turn a tie into a tiny push
    mean = sum(rewards) / n
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / n)
    return [(r - mean) / (std + eps) for r in rewards]
