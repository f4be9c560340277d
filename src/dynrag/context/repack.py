"""Repacking: the order in which ranked passages go into the prompt.

The input is ranked best first (a retriever's or reranker's order). The prompt puts documents
before the question, so the last document is the one read closest to the question.

- forward: best first, as ranked: [1, 2, 3, 4, 5]
- reverse: best last, next to the question: [5, 4, 3, 2, 1] (the paper's choice)
- sides:   best at both ends, weakest in the middle, alternating front and back:
           [1, 3, 5, 4, 2] (after "lost in the middle": models read the ends best)
"""

from __future__ import annotations

from typing import Literal, Sequence, TypeVar

T = TypeVar("T")

RepackOrder = Literal["forward", "reverse", "sides"]
REPACK_ORDERS: tuple[str, ...] = ("forward", "reverse", "sides")


def repack(ranked: Sequence[T], order: str = "forward") -> list[T]:
    """Reorder items ranked best first; see the module doc for each order."""
    items = list(ranked)
    if order == "forward":
        return items
    if order == "reverse":
        return items[::-1]
    if order == "sides":
        # Ranks 1, 3, 5, ... fill the front in order; ranks 2, 4, ... fill the back from the end.
        return items[0::2] + items[1::2][::-1]
    raise ValueError(f"unknown repack order {order!r}; choose one of: {', '.join(REPACK_ORDERS)}")
