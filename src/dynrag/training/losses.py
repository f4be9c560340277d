"""The two training objectives, and the model passes they need.

- Imitation: mean cross-entropy over the labelled tokens. The LM head runs only on positions
  whose next token carries loss: passages and prompt are most of a narrative's tokens, and on a
  49k-word vocabulary the head is a large part of a small model's cost.
- Chain of calibration (DPO, Rafailov et al. 2023): for a pair with the same history,
  loss = -log sigmoid(beta * ((log pi(chosen) - log ref(chosen)) - (log pi(rejected) - log ref(rejected)))),
  log-probabilities summed over the completion's tokens. The shared history is run once and
  both completions continue from its key/value cache.
- GRPO (Shao et al. 2024), per learned token t of a rollout with advantage A:
  loss_t = -(min(r_t A, clip(r_t, 1 - eps, 1 + eps) A) - beta * KL_t + c * H_t), r_t = pi(t) / pi_old(t),
  KL_t = ref(t)/pi(t) - log(ref(t)/pi(t)) - 1 (the unbiased, always non-negative estimator),
  optionally clamped to +-bound, and H_t the entropy of the policy's whole next-token
  distribution at t (a bonus with weight c keeps sampling from collapsing early). The step's
  loss averages loss_t either over all learned tokens of the step, or per rollout and then over
  rollouts (`loss_weights`).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.nn.functional as F

from dynrag.training.examples import IGNORE, TrainExample


def head_logits(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    logits = model.get_output_embeddings()(hidden).float()
    softcap = getattr(model.config, "final_logit_softcapping", None)
    return torch.tanh(logits / softcap) * softcap if softcap else logits


def collate(examples: Sequence[TrainExample], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded (input_ids, attention_mask, labels)."""
    width = max(len(ex) for ex in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    labels = torch.full((len(examples), width), IGNORE, dtype=torch.long)
    for row, ex in enumerate(examples):
        n = len(ex)
        ids[row, :n] = torch.tensor(ex.input_ids)
        mask[row, :n] = 1
        labels[row, :n] = torch.tensor(ex.labels)
    return ids, mask, labels


def imitation_loss(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(mean cross-entropy over labelled tokens, how many) — the same value as transformers'
    own `model(..., labels=labels).loss`, computed with the head on labelled positions only."""
    hidden = model.base_model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
    targets = labels[:, 1:]
    keep = targets != IGNORE
    logits = head_logits(model, hidden[:, :-1][keep])
    return F.cross_entropy(logits, targets[keep]), int(keep.sum())


def dpo_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, ref_chosen: torch.Tensor,
             ref_rejected: torch.Tensor, beta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(per-pair losses, per-pair margins beta * (chosen log-ratio - rejected log-ratio))."""
    margins = beta * ((policy_chosen - ref_chosen) - (policy_rejected - ref_rejected))
    return -F.logsigmoid(margins), margins


def completion_logprobs(model: Any, prompt_ids: Sequence[int], completions: Sequence[Sequence[int]],
                        masks: Sequence[Sequence[bool]] | None = None) -> torch.Tensor:
    """log P(completion | prompt) for each completion, summed over its tokens (those whose mask is
    True, when `masks` is given: given text such as passages is read but not scored), from one
    pass over the prompt and one batched pass over the completions continuing from its cache."""
    if not completions or any(len(c) == 0 for c in completions):
        raise ValueError("every completion needs at least one token")
    if masks is not None:
        weights = [torch.tensor([float(m) for m in mask]) for mask in masks]
        if [len(w) for w in weights] != [len(c) for c in completions]:
            raise ValueError("each mask must have one entry per completion token")
    device = next(model.parameters()).device
    out = model.base_model(input_ids=torch.tensor([list(prompt_ids)], device=device), use_cache=True)
    first = F.log_softmax(head_logits(model, out.last_hidden_state[0, -1]), dim=-1)  # predicts token 0
    totals = [first[c[0]] * (1.0 if masks is None else float(masks[i][0])) for i, c in enumerate(completions)]
    longest = max(len(c) for c in completions)
    if longest > 1:
        # Right-padded continuations: a token never attends to later (pad) positions, so no mask is needed.
        rest = torch.tensor([list(c[:-1]) + [c[0]] * (longest - len(c)) for c in completions], device=device)
        cache = out.past_key_values
        cache.batch_repeat_interleave(len(completions))  # new tensors: the graph of the prompt pass stays intact
        hidden = model.base_model(input_ids=rest, cache=cache, use_cache=True).last_hidden_state
        logp = F.log_softmax(head_logits(model, hidden), dim=-1)
        for i, c in enumerate(completions):
            if len(c) > 1:
                nxt = torch.tensor(list(c[1:]), device=device)
                scores = logp[i, : len(c) - 1].gather(1, nxt[:, None])[:, 0]
                if masks is not None:
                    scores = scores * weights[i][1:].to(device)
                totals[i] = totals[i] + scores.sum()
    return torch.stack(totals)


def _learned_distributions(model: Any, input_ids: Sequence[int], labels: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(log-softmax over the vocabulary at each position whose next token is learned, those tokens)."""
    device = next(model.parameters()).device
    ids = torch.tensor([list(input_ids)], device=device)
    hidden = model.base_model(input_ids=ids, use_cache=False).last_hidden_state[0]
    targets = torch.tensor(list(labels)[1:], device=device)
    keep = targets != IGNORE
    return F.log_softmax(head_logits(model, hidden[:-1][keep]), dim=-1), targets[keep]


def learned_logprobs(model: Any, input_ids: Sequence[int], labels: Sequence[int]) -> torch.Tensor:
    """log P(token) of every learned token (label not -100) of one sequence, in order, from one
    pass with the head on those positions only."""
    logp, targets = _learned_distributions(model, input_ids, labels)
    return logp.gather(1, targets[:, None])[:, 0]


def learned_logprobs_entropy(model: Any, input_ids: Sequence[int], labels: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(log P(token), entropy of the whole next-token distribution) at every learned token, one pass."""
    logp, targets = _learned_distributions(model, input_ids, labels)
    return logp.gather(1, targets[:, None])[:, 0], token_entropy(logp)


def token_entropy(logp: torch.Tensor) -> torch.Tensor:
    """Entropy of each row of log-probabilities over the last axis: -sum p log p."""
    return -(logp.exp() * logp).sum(-1)


# The log-ratio is bounded before its exponential so a token the reference finds far likelier
# stays finite (and its gradient defined) while the clamp below cuts it.
LOG_RATIO_BOUND = 20.0


def kl_estimates(logp: torch.Tensor, ref_logp: torch.Tensor, bound: float | None = None) -> torch.Tensor:
    """Per-token KL(pi || ref) estimates ref/pi - log(ref/pi) - 1, clamped to +-`bound` when given:
    a token the policy has moved far from the reference pulls no harder than `bound`."""
    log_ratio = ref_logp - logp
    if bound is not None:
        log_ratio = torch.clamp(log_ratio, -LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    kl = torch.exp(log_ratio) - log_ratio - 1
    return kl if bound is None else torch.clamp(kl, -bound, bound)


def grpo_token_losses(logp: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor, advantage: float,
                      clip: float, beta: float, *, entropy: torch.Tensor | None = None, entropy_coef: float = 0.0,
                      kl_bound: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(per-token GRPO losses, per-token KL estimates) of one rollout (module docstring)."""
    ratio = torch.exp(logp - old_logp)
    surrogate = torch.minimum(ratio * advantage, torch.clamp(ratio, 1 - clip, 1 + clip) * advantage)
    kl = kl_estimates(logp, ref_logp, kl_bound)
    objective = surrogate - beta * kl
    if entropy is not None and entropy_coef:
        objective = objective + entropy_coef * entropy
    return -objective, kl


def loss_weights(lengths: Sequence[int], average: str) -> list[float]:
    """The weight of each learned token of each rollout in the step's loss, by rollout:
    "token": 1 / (learned tokens of the whole step), so every token counts the same;
    "rollout": 1 / (rollouts * that rollout's tokens), so every rollout counts the same.
    A rollout with no learned token gets 0."""
    if average == "token":
        total = sum(lengths)
        return [1.0 / total if total and n else 0.0 for n in lengths]
    if average == "rollout":
        return [1.0 / (len(lengths) * n) if n else 0.0 for n in lengths]
    raise ValueError(f"loss average {average!r}: token or rollout")


def average_token_losses(per_token: Sequence[torch.Tensor], average: str) -> torch.Tensor:
    """The step's loss from each rollout's per-token losses (`loss_weights`)."""
    weights = loss_weights([len(t) for t in per_token], average)
    return sum((w * t.sum() for w, t in zip(weights, per_token)), torch.tensor(0.0))
