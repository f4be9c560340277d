"""The training objectives against hand-computed values and plain transformers passes (tiny Llama)."""

import math

import pytest
import torch
import torch.nn.functional as F

from dynrag.training.examples import IGNORE, TrainExample
from dynrag.training.losses import collate, completion_logprobs, dpo_loss, imitation_loss
from tests.tiny_models import tiny_gemma3, tiny_llama

torch.set_num_threads(1)


def test_dpo_loss_against_a_hand_computed_value():
    # beta 0.4; chosen log-ratio -1 - (-1.5) = 0.5; rejected log-ratio -2 - (-1.5) = -0.5
    # margin = 0.4 * (0.5 - (-0.5)) = 0.4; loss = log(1 + e^-0.4) = 0.513015...
    losses, margins = dpo_loss(torch.tensor([-1.0]), torch.tensor([-2.0]), torch.tensor([-1.5]), torch.tensor([-1.5]), 0.4)
    assert margins.item() == pytest.approx(0.4)
    assert losses.item() == pytest.approx(math.log(1 + math.exp(-0.4)), abs=1e-6)
    assert losses.item() == pytest.approx(0.5130153, abs=1e-6)
    # at the start of training policy == reference: every pair costs log 2, whatever the beta
    same = torch.tensor([-3.0, -0.2])
    losses, margins = dpo_loss(same, same.flip(0), same, same.flip(0), 0.4)
    assert torch.allclose(losses, torch.full((2,), math.log(2))) and torch.all(margins == 0)


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def model(request):
    build = tiny_llama if request.param == "llama" else tiny_gemma3
    return build(64, seed=4).train()


def test_imitation_loss_equals_transformers_own_loss(model):
    examples = [
        TrainExample("a", (1, 5, 6, 7, 8, 9, 2), (IGNORE, IGNORE, IGNORE, 7, 8, IGNORE, 2)),
        TrainExample("b", (1, 10, 11, 12), (IGNORE, 10, 11, 12)),
    ]
    ids, mask, labels = collate(examples, pad_id=0)
    assert ids.shape == (2, 7) and mask[1].tolist() == [1, 1, 1, 1, 0, 0, 0] and labels[1, 4:].tolist() == [IGNORE] * 3
    ours, n = imitation_loss(model, ids, mask, labels)
    reference = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    assert n == 6  # tokens 7, 8, 2 and 10, 11, 12; the first token of a row can never be predicted
    assert ours.item() == pytest.approx(reference.item(), abs=1e-5)


def plain_completion_logprob(model, prompt, completion):
    ids = torch.tensor([list(prompt) + list(completion)])
    logp = F.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
    return sum(logp[len(prompt) - 1 + i, tok] for i, tok in enumerate(completion))


def test_completion_logprobs_from_a_shared_prompt_pass_equal_separate_full_passes(model):
    prompt = [1, 20, 21, 22, 23, 24, 25]
    completions = [[30, 31, 32], [40], [50, 51]]
    ours = completion_logprobs(model, prompt, completions)
    plain = torch.stack([plain_completion_logprob(model, prompt, c) for c in completions])
    assert torch.allclose(ours, plain, atol=1e-5)
    # and the gradients agree, through the shared key/value cache
    first = next(p for p in model.parameters())
    model.zero_grad()
    ours.sum().backward()
    ours_grad = first.grad.clone()
    model.zero_grad()
    plain = torch.stack([plain_completion_logprob(model, prompt, c) for c in completions])
    plain.sum().backward()
    assert torch.allclose(ours_grad, first.grad, atol=1e-5)
    model.zero_grad()
    with pytest.raises(ValueError):
        completion_logprobs(model, prompt, [[]])
