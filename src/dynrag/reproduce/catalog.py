"""Every table ``dynrag reproduce`` knows, by name: importing the papers' modules registers them."""

from __future__ import annotations

from typing import Any

from dynrag.reproduce import (  # noqa: F401  (each registers its tables)
    bestpractice,
    bestpractice_retrieval,
    deeprag,
    deeprag_ablations,
    deeprag_figure7,
    deeprag_figure8,
    dragin,
    dragin_ablations,
    dynamic_family,
    world,
)
from dynrag.reproduce.retrieval_tables import RETRIEVAL_TABLES
from dynrag.reproduce.tables import TABLES, Table


def table_names() -> list[str]:
    """Every table and figure `dynrag reproduce` runs."""
    return sorted([*TABLES.names(), *RETRIEVAL_TABLES.names(), "bestpractice-figure3", "bestpractice-table1",
                   "deeprag-figure3"])


def open_table(name: str, options: dict[str, Any] | None = None) -> Table:
    return TABLES.open(name, options or {})
