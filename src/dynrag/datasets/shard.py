"""Shards of a benchmark: ``I/K`` takes every K-th question from the I-th on (1-based), after
``--limit``. A row too long for one machine or one session runs as K shards, each an ordinary run
of its own, and `reproduce --no-run` joins them back into the row (reproduce/shards.py).

Interleaving, rather than cutting the file into K consecutive blocks, gives every shard the same mix of easy and
hard questions, so the shards finished so far already say roughly what the row will.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence, TypeVar

from dynrag.errors import ConfigError

T = TypeVar("T")
_SHAPE = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    count: int

    @classmethod
    def parse(cls, text: str, flag: str = "--shard") -> "Shard":
        match = _SHAPE.fullmatch(str(text))
        if match is None:
            raise ConfigError(f"{flag} {text!r}: expected I/K, e.g. 2/4 (the second of four shards)")
        index, count = int(match.group(1)), int(match.group(2))
        if count < 1 or not 1 <= index <= count:
            raise ConfigError(f"{flag} {text!r}: I must be 1 to K, and K at least 1")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def slug(self) -> str:
        """For directory and record names: ``shard2of4``."""
        return f"shard{self.index}of{self.count}"

    def pick(self, items: Sequence[T]) -> list[T]:
        """This shard's items, in their order."""
        return list(items[self.index - 1::self.count])

    def positions(self, total: int) -> list[int]:
        """The 0-based places in the whole of ``total`` items that ``pick`` takes."""
        return list(range(self.index - 1, total, self.count))

