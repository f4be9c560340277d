"""``BatchingLM``: a local model that many threads can use at once, their generations batched.

Each thread runs one question with the method code it would run alone; the model calls it makes
go to one ``BatchEngine`` (lm/batch_engine.py), which decodes all the rows in flight in one
forward pass per token. Calls that only use the tokenizer (``count_tokens``, ``encode``...) run on
the caller's thread: a fast tokenizer's encode and decode only read it, and nothing here changes
its truncation or padding settings.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from dynrag.errors import ConfigError
from dynrag.lm.base import Generation, HiddenSamples, Prompt, PrefillCounts
from dynrag.lm.batch_engine import BatchEngine, EngineStats
from dynrag.lm.stopping import StopWhen


def can_batch(lm: Any) -> str | None:
    """None when ``lm`` can decode in batches, else why not (one line)."""
    from dynrag.lm.hf import HFLanguageModel

    if not isinstance(lm, HFLanguageModel):
        return f"model {getattr(lm, 'name', lm)!r} does not run in this process (batching needs a local model)"
    config = lm.model.config
    layer_types = getattr(config, "layer_types", None) or ()
    if getattr(config, "sliding_window", None) and any("sliding" in str(t) for t in layer_types):
        # Left padding shifts cache columns against positions, which a sliding-window mask reads.
        return f"model {lm.name!r} has sliding-window attention layers, which batched decoding does not support"
    return None


class BatchingLM:
    def __init__(self, lm: Any, max_rows: int, max_cached_tokens: int | None = None):
        why = can_batch(lm)
        if why is not None:
            raise ConfigError(f"--batch {max_rows}: {why}; use --workers instead")
        self.inner = lm
        self.engine = BatchEngine(lm, max_rows=max_rows, max_cached_tokens=max_cached_tokens)
        self.name = lm.name
        self.capabilities = lm.capabilities
        self.context_window = lm.context_window

    @property
    def stats(self) -> EngineStats:
        return self.engine.stats

    @property
    def prefill_counts(self) -> PrefillCounts:
        return self.engine.call(lambda: self.inner.prefill_counts)

    def close(self) -> None:
        self.engine.close()

    def generate(self, prompt: str | Prompt, max_new_tokens: int, stop: Sequence[str] = (),
                 capture_attention: bool = False, stop_after: Sequence[str] = (),
                 stop_when: StopWhen | None = None) -> Generation:
        return self.engine.generate(prompt, max_new_tokens, stop, capture_attention, stop_after, stop_when)

    def next_token_logprobs(self, prompt: str | Prompt, candidates: Sequence[str]) -> np.ndarray:
        return self.engine.call(lambda: self.inner.next_token_logprobs(prompt, candidates))

    def text_logprobs(self, text: str) -> tuple[list[int], list[tuple[int, int]], np.ndarray]:
        return self.engine.call(lambda: self.inner.text_logprobs(text))

    def attention_pass(self, token_ids: list[int], per_head: bool = False, bos: bool = True) -> np.ndarray:
        return self.engine.call(lambda: self.inner.attention_pass(token_ids, per_head=per_head, bos=bos))

    def sample_hidden_states(self, prompt: str | Prompt, n: int, layer: int | None, max_new_tokens: int,
                             **sampling: Any) -> HiddenSamples:
        # Its rows decode together already; it runs alone between the engine's batched steps.
        return self.engine.call(lambda: self.inner.sample_hidden_states(prompt, n, layer, max_new_tokens, **sampling))

    # The tokenizer alone: on the caller's thread.
    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def first_token_id(self, text: str) -> int:
        return self.inner.first_token_id(text)

    def encode(self, text: str, special_tokens: bool = False) -> list[int]:
        return self.inner.encode(text, special_tokens)

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.inner.decode(token_ids)

    def raw_tokens(self, token_ids: Sequence[int]) -> list[str]:
        return self.inner.raw_tokens(token_ids)

    @property
    def bos_token_id(self) -> int | None:
        return self.inner.bos_token_id
