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

The llama.cpp backend reads the same two representations out of its own graph
(lm/llama_hidden.py); ``SampledRows`` and ``draw_tokens`` here are shared with it, so a row ends,
and its state is read, at the same token on either backend.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

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


def middle_index(count: int) -> int:
    """The block SeaKR reads by default: 15 (0-based) of Llama-2-7B's 32, i.e. ``L // 2 - 1``."""
    return max(0, count // 2 - 1)


def resolve_layer(count: int, layer: int | None) -> int:
    """``layer``, or the middle block when None; an error naming the range when a model of
    ``count`` blocks has no such block."""
    chosen = middle_index(count) if layer is None else layer
    if not 0 <= chosen < count:
        raise ConfigError(f"layer={layer}: this model has decoder blocks 0..{count - 1}")
    return chosen


def middle_block(model: Any) -> int:
    return middle_index(len(decoder_blocks(model)))


def resolve_block(model: Any, layer: int | None) -> int:
    return resolve_layer(len(decoder_blocks(model)), layer)


def candidates(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(probabilities, token ids), each (rows, c), most likely first: the tokens one draw may pick
    from each row of ``logits``. The logits are divided by ``temperature``, cut to the ``top_k``
    highest (0: all), softmaxed, then cut to the nucleus of mass ``top_p`` (the most likely token
    always stays) and renormalised. Sampling among the candidates, not the whole vocabulary, is
    the same distribution at a fraction of the cost (150k tokens a row for Qwen2.5)."""
    scaled = logits.float() / temperature
    vocabulary = scaled.shape[-1]
    values, ids = torch.topk(scaled, top_k if 0 < top_k < vocabulary else vocabulary, dim=-1)
    probs = torch.softmax(values, dim=-1)
    if top_p < 1.0:
        probs = probs * ((torch.cumsum(probs, dim=-1) - probs) < top_p)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs, ids


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


class SampledRows:
    """The bookkeeping of ``n`` continuations drawn together, shared by both backends so a row
    ends, and its state is read, at the same token on either.

    ``step`` takes one drawn token per row. A live row whose token ends a turn (``ends``), or whose
    text then reaches a stop string or the token limit, ends now: the token is dropped, the EOS
    ``eos_feed`` is fed instead, and the state the backend reads at that position is the row's
    (``finish``). Every other live row is fed its token."""

    def __init__(self, n: int, ends: Callable[[int], bool], eos_feed: int, max_new_tokens: int,
                 stop: Sequence[str], decode: Callable[[list[int]], str]):
        self.n, self.ends, self.eos_feed = n, ends, eos_feed
        self.max_new_tokens, self.stop, self.decode = max_new_tokens, stop, decode
        self.rows: list[list[int]] = [[] for _ in range(n)]
        self.texts = [""] * n
        self.ended = [False] * n
        self.states: list[np.ndarray | None] = [None] * n

    def live(self) -> list[int]:
        return [i for i in range(self.n) if not self.ended[i]]

    def step(self, drawn: Sequence[int]) -> tuple[list[int], list[int]]:
        """(the token each row is fed: EOS for a row that ends now or has ended, the rows ending now)."""
        feed, ending = [self.eos_feed] * self.n, []
        for i in self.live():
            token = int(drawn[i])
            if not self.ends(token):
                self.rows[i].append(token)
                self.texts[i], stopped = _cut_at_stop(self.decode(self.rows[i]), self.stop)
                if not stopped and len(self.rows[i]) < self.max_new_tokens:
                    feed[i] = token
                    continue
                self.rows[i].pop()  # replaced by the EOS fed now
            ending.append(i)
        return feed, ending

    def finish(self, i: int, state: np.ndarray) -> None:
        self.states[i], self.ended[i] = np.asarray(state, dtype=np.float32), True

    def samples(self) -> HiddenSamples:
        # each state is float32 already (finish)
        return HiddenSamples(texts=self.texts, states=np.stack(self.states), token_ids=self.rows)  # type: ignore[arg-type]


def draw_tokens(logits: torch.Tensor, temperature: float, top_k: int, top_p: float,
                generator: torch.Generator) -> torch.Tensor:
    """One token per row of ``logits``: the argmax at temperature 0, else a draw among its ``candidates``."""
    if temperature == 0:
        return logits.argmax(dim=-1).cpu()
    probs, ids = candidates(logits, temperature, top_k, top_p)
    chosen = torch.multinomial(probs.cpu(), 1, generator=generator)
    return ids.cpu().gather(-1, chosen)[:, 0]


def feed_token(eos_ids: set[int], preferred: int | None) -> int:
    """The EOS fed after a finished row: the tokenizer's own when it is one of ``eos_ids`` (or
    there are none), else the lowest of them."""
    return preferred if preferred in eos_ids or not eos_ids else min(eos_ids)


def sample_states(model: Any, tokenizer: Any, cache: Any, logits: torch.Tensor, eos_ids: set[int], *, n: int, layer: int,
                  max_new_tokens: int, stop: Sequence[str], representation: str, temperature: float, top_k: int,
                  top_p: float, seed: int) -> HiddenSamples:
    """``n`` rows decoded after a prefilled ``cache`` whose next-token ``logits`` are given (1-D);
    any of ``eos_ids`` ends a row, and the tokenizer's own EOS (else the first of them) is fed."""
    check_representation(representation)
    tap = _FeedForwardTap(decoder_blocks(model)[layer]) if representation == "ffn" else None
    generator = torch.Generator(device="cpu").manual_seed(seed)
    ends = eos_ids.__contains__
    sampled = SampledRows(n, ends, feed_token(eos_ids, tokenizer.eos_token_id), max_new_tokens, stop,
                          lambda ids: tokenizer.decode(ids, skip_special_tokens=True))
    cache.batch_repeat_interleave(n)
    step_logits = logits.reshape(1, -1).expand(n, -1)
    try:
        for _ in range(max_new_tokens):
            feed, ending = sampled.step(draw_tokens(step_logits, temperature, top_k, top_p, generator).tolist())
            # an ended row keeps being fed EOS, which no one reads: the batch keeps its shape
            out = model(input_ids=torch.tensor(feed, device=model.device)[:, None], cache=cache, use_cache=True,
                        logits_to_keep=1, output_hidden_states=tap is None)
            read = tap.last if tap is not None else out.hidden_states[layer + 1][:, -1, :]
            for i in ending:
                sampled.finish(i, read[i].float().cpu().numpy())
            if not sampled.live():
                break
            step_logits = out.logits[:, -1]
    finally:
        if tap is not None:
            tap.remove()
    return sampled.samples()


def check_representation(representation: str) -> None:
    if representation not in REPRESENTATIONS:
        raise ConfigError(f"representation={representation!r}: choose one of {', '.join(REPRESENTATIONS)}")


def _cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """``text`` up to its first stop string, and whether one was found."""
    cuts = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return (text[: min(cuts)], True) if cuts else (text, False)
