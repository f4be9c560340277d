"""Key/value caches of recent calls, reused when a new prompt starts with what one of them covers.

Dynamic-RAG methods call the model again and again on prompts that extend each other: the next
step's prompt is the last prompt plus what was generated (DRAGIN, FLARE, DeepRAG's narrative), and
a tree search continues several branches of one history. Prefilling only the new tail of each
prompt saves most of the prefill. Entries are kept least-recently-used; a reused cache is a copy
(decoding appends to it), cropped back to the common prefix where the layers allow it (full
attention; sliding-window layers cannot be cropped, so they are reused only when the new prompt
extends an entry whole). The marked reusable prefix of a prompt (instruction and exemplars) is
pinned, as before. The logits equal a full prefill's to float rounding.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from typing import Any, Callable

from transformers import DynamicCache

MIN_REUSE = 8  # a shorter common prefix is not worth a copy


def croppable(cache: DynamicCache) -> bool:
    """Whether tokens can be taken off the end: not with sliding-window layers, which keep only
    their last window (transformers' own `is_croppable` says yes for them until a crop fails)."""
    return not any(cache.is_sliding)


def common_prefix(a: tuple[int, ...], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class KVReuse:
    def __init__(self, config: Any, slots: int = 4):
        self.config, self.slots = config, slots
        self.recent: OrderedDict[tuple[int, ...], DynamicCache] = OrderedDict()
        self.pinned: tuple[tuple[int, ...], DynamicCache] | None = None

    def new_cache(self) -> DynamicCache:
        return DynamicCache(config=self.config)

    def pin(self, ids: tuple[int, ...], compute: Callable[[DynamicCache], None]) -> None:
        """Keep the cache of `ids` (computed by `compute` into a fresh cache) for good."""
        if self.pinned is None or self.pinned[0] != ids:
            cache = self.new_cache()
            compute(cache)
            self.pinned = (ids, cache)

    def lookup(self, ids: list[int]) -> tuple[DynamicCache, int]:
        """A copy of the cache covering the longest reusable prefix of `ids` (leaving at least one
        token to feed), and how many tokens it covers; a fresh cache and 0 when none is."""
        limit = len(ids) - 1
        best: tuple[int, tuple[int, ...] | None, DynamicCache | None] = (0, None, None)
        candidates = list(self.recent.items()) + ([self.pinned] if self.pinned else [])
        for key, cache in candidates:
            n = min(common_prefix(key, ids), limit)
            if n < len(key) and not croppable(cache):
                continue
            if n > best[0]:
                best = (n, key, cache)
        n, key, cache = best
        if key is None or n < MIN_REUSE:
            return self.new_cache(), 0
        if key in self.recent:
            self.recent.move_to_end(key)
        reused = copy.deepcopy(cache)
        if n < len(key):
            reused.crop(n - len(key))  # a negative count: take that many tokens off the end
        return reused, n

    def store(self, ids: list[int], cache: DynamicCache) -> None:
        """Remember `cache`, which covers the first `cache.get_seq_length()` tokens of `ids`."""
        covered = tuple(ids[: cache.get_seq_length()])
        if len(covered) < MIN_REUSE:
            return
        self.recent[covered] = cache
        self.recent.move_to_end(covered)
        while len(self.recent) > self.slots:
            self.recent.popitem(last=False)
