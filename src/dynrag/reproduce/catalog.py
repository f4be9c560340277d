"""Every table ``dynrag reproduce`` knows, by name: importing the papers' modules registers them."""

from __future__ import annotations

from typing import Any

from dynrag.reproduce import bestpractice, deeprag, dragin, world  # noqa: F401  (each registers its tables)
from dynrag.reproduce.tables import TABLES, Table


def open_table(name: str, options: dict[str, Any] | None = None) -> Table:
    return TABLES.open(name, options or {})
