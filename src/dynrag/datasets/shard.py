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
_SLUG_END = re.compile(r"shard(\d+)of(\d+)$")  # what ``Shard.slug`` writes, at the end of a name


def _in_range(index: int, count: int) -> bool:
    """Whether I/K names a shard that exists: K at least 1, I from 1 to K."""
    return count >= 1 and 1 <= index <= count


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    count: int

    @classmethod
    def _read(cls, text: str) -> "Shard | str":
        """The shard ``text`` names as I/K, or what is wrong with it."""
        match = _SHAPE.fullmatch(str(text))
        if match is None:
            return "expected I/K, e.g. 2/4 (the second of four shards)"
        index, count = int(match.group(1)), int(match.group(2))
        return cls(index, count) if _in_range(index, count) else "I must be 1 to K, and K at least 1"

    @classmethod
    def problem(cls, text: str) -> str | None:
        """What is wrong with ``text`` as I/K, or None when nothing is."""
        read = cls._read(text)
        return read if isinstance(read, str) else None

    @classmethod
    def parse(cls, text: str, flag: str = "--shard") -> "Shard":
        read = cls._read(text)
        if isinstance(read, str):
            raise ConfigError(f"{flag} {text!r}: {read}")
        return read

    @classmethod
    def ending(cls, name: str) -> "Shard | None":
        """The shard whose ``slug`` ends ``name`` (a run directory's or a record's), else None."""
        match = _SLUG_END.search(name)
        if match is None:
            return None
        index, count = int(match.group(1)), int(match.group(2))
        return cls(index, count) if _in_range(index, count) else None

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

