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


# The tables that answer in a loop of their own (training readers, GRPO, a classifier), by the kind
# of job in reproduce/kinds.py that runs them; the rest are in the two table registries.
OWN_LOOP_TABLES = {
    "reader-figure": ("bestpractice-figure3",),
    "grpo-figure": ("deeprag-figure3",),
    "classifier-table": ("bestpractice-table1",),
}


def table_names() -> list[str]:
    """Every table and figure `dynrag reproduce` runs."""
    return sorted([*TABLES.names(), *RETRIEVAL_TABLES.names(), *(t for ts in OWN_LOOP_TABLES.values() for t in ts)])


def open_table(name: str, options: dict[str, Any] | None = None) -> Table:
    return TABLES.open(name, options or {})
