"""Attention for tokens llama.cpp decodes: one transformers pass over the same weights.

llama.cpp gives no attention, and DRAGIN needs the last-layer attention of every generated token.
As the DRAGIN authors' code does, the text is decoded first and its attention read afterwards by
a transformers forward pass over it. Here the pass runs beside decoding, in blocks: llama.cpp
decodes a few tokens (up to a sentence end, at most ``BLOCK`` tokens), transformers feeds them in
one forward pass after the prompt's cache (the instruction and exemplars' cache is kept between
calls, as in transformers decoding), and a ``stop_when`` callback is then replayed token by token
over the block, seeing at each token exactly what it would have seen decoding on transformers: the
rows of every token but the newest. When it fires inside a block the tokens after it are dropped,
so the decisions are those of transformers decoding on the same tokens; llama.cpp wastes at most
a block of tokens.

The transformers model is the float32 copy of the same GGUF weights (lm/bundled.py converts it),
so token ids are shared; llama.cpp's quantised arithmetic may still choose other tokens than
transformers would (benchmarks/LOG.md reports how often the answers agree).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Protocol, Sequence

import numpy as np
import torch

from dynrag.lm.base import Generation, Prompt, PromptTokens
from dynrag.lm.stopping import DecodeState, StopWhen

if TYPE_CHECKING:
    from dynrag.lm.hf import HFLanguageModel

# Tokens decoded between attention passes when no sentence ends first: a callback that fires
# mid-block costs at most this many wasted llama.cpp tokens.
BLOCK = 8
SENTENCE_MARKS = (".", "?", "!", "\n")


class TokenDecoder(Protocol):
    """What decodes the tokens (lm/llama_cpp.py's LlamaCppLM), from a prompt it has tokenized."""

    def decode_from(self, prompt: Prompt, tokens: PromptTokens, max_new_tokens: int, stop: Sequence[str] = (),
                    stop_after: Sequence[str] = (), stop_when: StopWhen | None = None) -> Generation: ...


class AttentionFollower:
    """The transformers model's cache following one generation: the prompt first (its cached
    prefix reused), then the generated tokens as they are handed over, each with its row."""

    def __init__(self, reader: "HFLanguageModel", prompt: Prompt, prompt_ids: list[int],
                 offsets: list[tuple[int, int]]):
        self.reader = reader
        self.fed = list(prompt_ids)
        with torch.inference_mode():
            self.cache, _ = reader.prefill(prompt, prompt_ids, offsets)
        self.rows: list[np.ndarray] = []

    def extend(self, generated: Sequence[int]) -> list[np.ndarray]:
        """Rows of ``generated`` (every token decoded so far), feeding those not fed yet."""
        new = list(generated[len(self.rows):])
        self.rows.extend(self.reader.rows_of(self.cache, new))
        self.fed.extend(new)
        return self.rows

    def close(self) -> None:
        self.reader.keep_cache(self.fed, self.cache)


class BlockWatch:
    """A ``stop_when`` for llama.cpp decoding that checks the real callback once a block is
    decoded, replaying it at every token of the block (see the module docstring)."""

    def __init__(self, follower: AttentionFollower, stop_when: StopWhen, block: int = BLOCK):
        self.follower, self.stop_when, self.block = follower, stop_when, block
        self.checked = 0  # tokens the callback has been replayed at
        self.fired_at: int | None = None  # tokens kept when it fired

    def __call__(self, state: DecodeState) -> bool:
        n = len(state.token_ids)
        ends_sentence = bool(state.pieces) and any(mark in state.pieces[-1] for mark in SENTENCE_MARKS)
        if n - self.checked < self.block and not ends_sentence:
            return False
        return self.replay(state, n)

    def replay(self, state: DecodeState, upto: int) -> bool:
        """Replay the callback at each token from the last checked one to ``upto``; True (and
        ``fired_at`` set) when it fires."""
        if upto <= self.checked:
            return False
        rows = self.follower.extend(state.token_ids[:upto])
        for m in range(self.checked + 1, upto + 1):
            seen = DecodeState(state.prompt_length, state.token_ids[:m], state.pieces[:m], state.logprobs[:m],
                               state.entropies[:m], rows[: m - 1], state.raw_tokens[:m])
            if self.stop_when(seen):
                self.fired_at = m
                return True
        self.checked = upto
        return False


def truncated(gen: Generation, keep: int) -> Generation:
    """``gen`` cut to its first ``keep`` tokens, ended by the callback."""
    return replace(
        gen, token_ids=gen.token_ids[:keep], pieces=gen.pieces[:keep], raw_tokens=gen.raw_tokens[:keep],
        logprobs=gen.logprobs[:keep], entropies=gen.entropies[:keep], stop_reason="callback",
    )


def generate_with_attention(
    decoder: TokenDecoder,
    reader: "HFLanguageModel",
    prompt: Prompt,
    tokens: PromptTokens,
    max_new_tokens: int,
    stop: Sequence[str] = (),
    stop_after: Sequence[str] = (),
    stop_when: StopWhen | None = None,
) -> Generation:
    """Decode with llama.cpp and give the generation the attention rows transformers computes
    for its tokens (``Generation.attention``), honouring ``stop_when`` as transformers would."""
    prompt_ids, offsets, _ = tokens
    follower = AttentionFollower(reader, prompt, prompt_ids, offsets)
    watch = BlockWatch(follower, stop_when) if stop_when is not None else None
    gen = decoder.decode_from(prompt, tokens, max_new_tokens, stop, stop_after, watch)
    if watch is not None:
        if watch.fired_at is None:
            # the last block ended by itself (end of text, a stop string, the token limit): replay it too
            state = DecodeState(len(prompt_ids), gen.token_ids, gen.pieces, list(gen.logprobs), list(gen.entropies),
                                [], gen.raw_tokens)
            watch.replay(state, len(gen.token_ids))
        if watch.fired_at is not None:
            gen = truncated(gen, watch.fired_at)
    rows = follower.extend(gen.token_ids)
    follower.close()
    return replace(gen, attention=rows[: len(gen.token_ids)])
