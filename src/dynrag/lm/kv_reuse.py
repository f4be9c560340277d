"""Key/value caches of recent calls, reused when a new prompt starts with what one of them covers.

Dynamic-RAG methods call the model again and again on prompts that extend each other: the next
step's prompt is the last prompt plus what was generated (DRAGIN and FLARE continuing without a
retrieval, the finishing step that adds the answer phrase, DeepRAG's narrative), a retrieval that
returns the documents already shown leaves the prompt as it was, and a tree search continues
several branches of one history. Each call looks for the cached sequence sharing the longest token
prefix with its prompt, copies that prefix and prefills only the rest; what it then fed (prompt
and output) is remembered for the next call.

Modes (`kv_reuse`, a model option: ``--model 'bundled?kv_reuse=prefix'``):
  recent  (default) the marked reusable prefix (instruction and exemplars) is pinned, and the last
          ``slots`` sequences are kept least-recently-used; a sequence that a newer one extends is
          dropped, so the slots hold distinct branches
  prefix  only the pinned prefix, as before caches were reused across calls (the comparison)
  off     every call prefills its whole prompt (the cold reference tests compare with)

Memory: at most ``slots`` + 1 sequences, each as long as a prompt plus its output (SmolLM2-135M:
46 KB a token, so about 50 MB for a 1,000-token sequence).

Every layer keeps its whole history, sliding-window layers too (their mask still limits what they
attend to), so any cached sequence can be cut back to a shared prefix; transformers' own sliding
layers drop old tokens and could only be reused when a prompt extends a sequence whole. Logits
and captured attention rows equal a full prefill's to float rounding (tests/lm/test_kv_reuse.py).
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from typing import Any, Callable

from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

from dynrag.lm.base import KV_REUSE_MODES, KVReuseMode, PrefillCounts

MIN_REUSE = 8  # a shorter common prefix is not worth a copy


def full_history(cache: DynamicCache) -> DynamicCache:
    """Give sliding-window layers a full-history layer instead, so the cache can be cut back."""
    cache.layers = [DynamicLayer() if isinstance(layer, DynamicSlidingWindowLayer) else layer
                    for layer in cache.layers]
    return cache


def croppable(cache: DynamicCache) -> bool:
    """Whether every layer holds plain per-token keys and values that a prefix can be cut from
    (not so for linear-attention or other special layers)."""
    return all(type(layer) is DynamicLayer for layer in cache.layers)


def prefix_copy(cache: DynamicCache, n: int) -> DynamicCache:
    """A new cache holding the first `n` positions of `cache` (copied: decoding appends to it)."""
    if not croppable(cache):
        if n != cache.get_seq_length():
            raise ValueError("this cache's layers cannot be cut back")
        return copy.deepcopy(cache)
    out = DynamicCache()
    out.layers = []
    for layer in cache.layers:
        fresh = DynamicLayer()
        if layer.is_initialized:
            fresh.update(layer.keys[..., :n, :], layer.values[..., :n, :])  # update copies them
        out.layers.append(fresh)
    return out


def drop_last(cache: DynamicCache, n: int) -> None:
    """Remove the last `n` positions from every layer of a croppable cache, in place."""
    if n <= 0:
        return
    if not croppable(cache):
        raise ValueError("this cache's layers cannot be cut back")
    for layer in cache.layers:
        if layer.is_initialized:
            layer.keys = layer.keys[..., :-n, :]
            layer.values = layer.values[..., :-n, :]


def common_prefix(a: tuple[int, ...], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class KVReuse:
    def __init__(self, config: Any, mode: KVReuseMode = "recent", slots: int = 4):
        if mode not in KV_REUSE_MODES:
            raise ValueError(f"kv_reuse {mode!r}: choose one of {', '.join(KV_REUSE_MODES)}")
        if slots < 1:
            raise ValueError("kv_slots must be at least 1")
        self.config, self.mode, self.slots = config, mode, slots
        self.recent: OrderedDict[tuple[int, ...], DynamicCache] = OrderedDict()
        self.pinned: tuple[tuple[int, ...], DynamicCache] | None = None
        self.counts = PrefillCounts()

    def new_cache(self) -> DynamicCache:
        return full_history(DynamicCache(config=self.config))

    def set_mode(self, mode: KVReuseMode) -> None:
        """Switch modes; what the new mode does not use is dropped (the pinned prefix is kept
        unless reuse goes off), and the counts go on."""
        if mode not in KV_REUSE_MODES:
            raise ValueError(f"kv_reuse {mode!r}: choose one of {', '.join(KV_REUSE_MODES)}")
        self.mode = mode
        self.recent.clear()
        if mode == "off":
            self.pinned = None

    def pin(self, ids: tuple[int, ...], compute: Callable[[DynamicCache], None]) -> None:
        """Keep the cache of `ids` (computed by `compute` into a fresh cache) for good."""
        if self.mode == "off" or len(ids) < MIN_REUSE:
            return
        if self.pinned is None or self.pinned[0] != ids:
            cache = self.new_cache()
            compute(cache)
            self.pinned = (ids, cache)
            self.counts.pinned_tokens += len(ids)

    def lookup(self, ids: list[int]) -> tuple[DynamicCache, int]:
        """A copy of the cache covering the longest reusable prefix of `ids` (leaving at least one
        token to feed), and how many tokens it covers; a fresh cache and 0 when none is. Counts
        the call's prompt in ``counts``."""
        limit = len(ids) - 1
        best: tuple[int, tuple[int, ...] | None, DynamicCache | None] = (0, None, None)
        candidates = ([self.pinned] if self.pinned else []) + (list(self.recent.items()) if self.mode == "recent" else [])
        for key, cache in candidates:
            n = min(common_prefix(key, ids), limit)
            if n < len(key) and not croppable(cache):
                continue
            if n > best[0]:
                best = (n, key, cache)
        n, key, cache = best
        self.counts.calls += 1
        self.counts.prompt_tokens += len(ids)
        if key is None or cache is None or n < MIN_REUSE:
            return self.new_cache(), 0
        self.counts.reused_tokens += n
        if key in self.recent:
            self.recent.move_to_end(key)
            if self.pinned is None or n > len(self.pinned[0]):
                self.counts.hits += 1
        return prefix_copy(cache, n), n

    def store(self, ids: list[int], cache: DynamicCache) -> None:
        """Remember `cache`, which covers the first `cache.get_seq_length()` tokens of `ids`."""
        if self.mode != "recent":
            return
        covered = tuple(ids[: cache.get_seq_length()])
        if len(covered) < MIN_REUSE:
            return
        if croppable(cache):
            for key in list(self.recent):
                if key[: len(covered)] == covered and len(key) >= len(covered):
                    self.recent.move_to_end(key)  # an entry already extends it: nothing new
                    return
                if covered[: len(key)] == key:
                    del self.recent[key]  # it extends this entry, which can be cut back from it
        self.recent[covered] = cache
        self.recent.move_to_end(covered)
        while len(self.recent) > self.slots:
            self.recent.popitem(last=False)
