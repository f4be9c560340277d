"""Continuations sampled together from one prompt, and one layer's hidden state after each (SeaKR).

The prompt is prefilled once and its key/value cache repeated for ``n`` rows, which then decode in
one forward pass per token. A row ends at the end-of-sequence token, at a stop string or at the
token limit; whichever token ended it, the row's next input is the end-of-sequence token instead,
and the chosen block's state at that position is the row's representation. Every continuation is
so read as a finished text, at the same kind of token, which is how the SeaKR authors' patched
vLLM reads them too (it swaps the ending token for EOS and decodes one more step).

Two representations: ``ffn``, the block's feed-forward output before it joins the residual stream
(what the authors' vLLM keeps: its Llama layer returns that output and the residual separately),
and ``residual``, the hidden state after the block as transformers' ``output_hidden_states``
gives it.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from dynrag.errors import ConfigError
from dynrag.lm.base import HiddenSamples

REPRESENTATIONS = ("ffn", "residual")


def decoder_blocks(model: Any) -> Any:
    """The model's list of decoder blocks (Llama, Qwen, Gemma and the like keep them as ``layers``)."""
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else model.base_model
    blocks = getattr(decoder, "layers", None)
    if blocks is None:
        raise ConfigError(f"cannot find the decoder blocks of {type(model).__name__} to read a hidden state from")
    return blocks


def middle_block(model: Any) -> int:
    """The block SeaKR reads by default: 15 (0-based) of Llama-2-7B's 32, i.e. ``L // 2 - 1``."""
    return max(0, len(decoder_blocks(model)) // 2 - 1)


def resolve_block(model: Any, layer: int | None) -> int:
    count = len(decoder_blocks(model))
    chosen = middle_block(model) if layer is None else layer
    if not 0 <= chosen < count:
        raise ConfigError(f"layer={layer}: this model has decoder blocks 0..{count - 1}")
    return chosen


def draw_probabilities(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """Row-wise sampling distribution: logits / temperature, cut to the ``top_k`` most likely
    tokens (0: no cut) and then to the nucleus of mass ``top_p``, renormalised."""
    scaled = logits.float() / temperature
    if 0 < top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    if top_p < 1.0:
        ordered, order = torch.sort(probs, dim=-1, descending=True)
        kept_sorted = (torch.cumsum(ordered, dim=-1) - ordered) < top_p  # the most likely is always kept
        kept = torch.zeros_like(kept_sorted).scatter(-1, order, kept_sorted)
        probs = probs * kept
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


class _FeedForwardTap:
    """Keeps the last position's output of one block's feed-forward module on each forward pass."""

    def __init__(self, block: Any):
        mlp = getattr(block, "mlp", None)
        if mlp is None:
            raise ConfigError("representation=ffn needs decoder blocks with an `mlp` module; use representation=residual")
        self.last: torch.Tensor | None = None
        self._handle = mlp.register_forward_hook(self._keep)

    def _keep(self, module: Any, args: Any, out: Any) -> None:
        out = out[0] if isinstance(out, tuple) else out
        self.last = out[:, -1, :].detach()

    def remove(self) -> None:
        self._handle.remove()


def sample_states(model: Any, tokenizer: Any, cache: Any, logits: torch.Tensor, eos_ids: set[int], *, n: int, layer: int,
                  max_new_tokens: int, stop: Sequence[str], representation: str, temperature: float, top_k: int,
                  top_p: float, seed: int) -> HiddenSamples:
    """``n`` rows decoded after a prefilled ``cache`` whose next-token ``logits`` are given (1-D);
    any of ``eos_ids`` ends a row, and the tokenizer's own EOS (else the first of them) is fed."""
    if representation not in REPRESENTATIONS:
        raise ConfigError(f"representation={representation!r}: choose one of {', '.join(REPRESENTATIONS)}")
    tap = _FeedForwardTap(decoder_blocks(model)[layer]) if representation == "ffn" else None
    generator = torch.Generator(device="cpu").manual_seed(seed)
    eos_id = tokenizer.eos_token_id if tokenizer.eos_token_id in eos_ids or not eos_ids else min(eos_ids)
    cache.batch_repeat_interleave(n)
    rows: list[list[int]] = [[] for _ in range(n)]
    texts = [""] * n
    ended = [False] * n
    states: list[torch.Tensor | None] = [None] * n
    step_logits = logits.reshape(1, -1).expand(n, -1)
    try:
        for _ in range(max_new_tokens):
            if temperature == 0:
                drawn = step_logits.argmax(dim=-1).cpu()
            else:
                probs = draw_probabilities(step_logits, temperature, top_k, top_p).cpu()
                drawn = torch.multinomial(probs, 1, generator=generator)[:, 0]
            feed, ending = [eos_id] * n, []
            for i in range(n):
                if ended[i]:
                    continue  # already read; it keeps feeding EOS, which no one reads
                token = int(drawn[i])
                if token not in eos_ids:
                    rows[i].append(token)
                    texts[i], stopped = _cut_at_stop(tokenizer.decode(rows[i], skip_special_tokens=True), stop)
                    if not stopped and len(rows[i]) < max_new_tokens:
                        feed[i] = token
                        continue
                    rows[i].pop()  # replaced by the EOS fed now
                ending.append(i)
            out = model(input_ids=torch.tensor(feed, device=model.device)[:, None], cache=cache, use_cache=True,
                        logits_to_keep=1, output_hidden_states=tap is None)
            read = tap.last if tap is not None else out.hidden_states[layer + 1][:, -1, :]
            for i in ending:
                states[i], ended[i] = read[i].float().cpu(), True
            if all(ended):
                break
            step_logits = out.logits[:, -1]
    finally:
        if tap is not None:
            tap.remove()
    stacked = torch.stack(states).numpy().astype(np.float32)  # type: ignore[arg-type]
    return HiddenSamples(texts=texts, states=stacked, token_ids=rows)


def _cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """``text`` up to its first stop string, and whether one was found."""
    cuts = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return (text[: min(cuts)], True) if cuts else (text, False)
