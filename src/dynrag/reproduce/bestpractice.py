"""The best-practices paper's module search (Table 11) on a multi-hop set. Figure 3 (the reader
trained with noisy contexts) is in bestpractice_figure3.py."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dynrag.registry import Options
from dynrag.reproduce.tables import TABLES, Column, RunSpec, Table, paper_cells, published

class BestPracticeOptions(Options):
    dataset: Literal["hotpotqa", "2wikimultihopqa"] = Field(
        "hotpotqa", description="the multi-hop set to run (the paper averages five task families)"
    )


@TABLES.register("bestpractice-table11", BestPracticeOptions, "Best-practices Table 11: the module search, on a multi-hop set")
def bestpractice_table11(options: BestPracticeOptions) -> Table:
    ds = options.dataset
    rows = [
        ("no_classification", "no query classification", {}, None),
        ("classification", "+ query classification", {"classify": True}, None),
        ("hybrid_hyde", "Hybrid with HyDE retrieval", {"query_transform": "hyde"}, "hybrid"),
        ("repack_reverse", "Reverse repacking", {"repack": "reverse"}, None),
        ("balanced", "balanced-efficiency practice", {"preset": "balanced"}, None),
        ("best", "best-performance practice", {"preset": "best"}, None),
    ]
    runs = [RunSpec(ds, key, label, "single", {"k": 3, **opts}, retriever) for key, label, opts, retriever in rows]
    columns = [
        Column("EM", "em", None), Column("F1", "f1", None),
        Column("latency s/query", "seconds_per_question", "latency", 2),
        Column("paper avg", None, "avg"), Column("paper RAG score", None, "rag_score"),
    ]
    cells = paper_cells("bestpractice-table11", "paper").get("multihop", {})
    return Table(
        "bestpractice-table11", f"Best-practices Table 11 (our {ds})", [ds], runs, lambda _: columns, {ds: cells},
        "Llama2-7B-Chat fine-tuned, Milvus over 140k passages, five task families, up to 500 questions each",
        notes=[published()["tables"]["bestpractice-table11"]["source"]],
    )
