"""DRAGIN's tables (Tables 2 and 3): its six methods with the authors' released settings per paper
model and dataset (``data/published.json``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dynrag.datasets.formats import dataset_spec
from dynrag.registry import Options
from dynrag.reproduce.claims import Claim, tested_claims
from dynrag.reproduce.tables import TABLES, WIKIPEDIA_BM25, Column, RunSpec, Table, paper_cells, published

# Run options every interleaving method gets here: the authors' loops have no retrieval or step cap
# (their token budget ends them), so ours are set out of the way.
UNCAPPED = {"k": 3, "max_retrievals": 100, "max_steps": 200}

PaperModel = Literal["Llama2-13b-chat", "Llama2-7b-chat", "Vicuna-13b-v1.5"]


class DraginTableOptions(Options):
    paper_model: PaperModel = Field(
        "Llama2-13b-chat", description="whose released thresholds to use and whose published cells to compare"
    )


# Datasets outside the paper, each run with the released settings of the paper dataset named here:
# MuSiQue's multi-hop span answers are closest to HotpotQA's. They have no published cells.
BORROWED_SETTINGS = {"musique": "hotpotqa"}


def settings_dataset(dataset: str) -> str:
    """The paper dataset whose released settings ``dataset``'s runs use (itself, if the paper ran it)."""
    return BORROWED_SETTINGS.get(dataset, dataset)


def released(paper_model: str, setting: str, dataset: str) -> float:
    """A released per-dataset setting of ``paper_model`` (dragin_threshold, flare_threshold, ...)."""
    return published()["released_settings"]["dragin"]["models"][paper_model][setting][settings_dataset(dataset)]


def dragin_runs(paper_model: str, datasets: list[str], keys: list[str]) -> list[RunSpec]:
    """DRAGIN's Table 2 runs with the authors' released settings for `paper_model` (see published.json)."""
    budgets = published()["released_settings"]["dragin"]["generate_max_length"]
    runs = []
    for ds in datasets:
        budget = budgets[settings_dataset(ds)]
        # Every BM25 query of the authors' code, the baselines' too, keeps its last 64 tokens.
        loop = {**UNCAPPED, "max_new_tokens": budget, "max_query_tokens": 64}
        # FLARE as DRAGIN's code runs it: retrieve when the sentence's mean (1 - p) exceeds h, mask
        # the tokens whose 1 - p exceeds h, i.e. mean p < 1 - h and p < 1 - h.
        flare_p = round(1.0 - released(paper_model, "flare_threshold", ds), 6)
        by_key = {
            "direct": RunSpec(ds, "direct", "wo-RAG", "direct", {"max_new_tokens": budget}),
            "single": RunSpec(ds, "single", "SR-RAG", "single", {"max_new_tokens": budget, "k": 3, "max_query_tokens": 64}),
            # The released FL-RAG config names no window; 25 tokens is the paper's FL-RAG query length (§5.4).
            "fixed_length": RunSpec(ds, "fixed_length", "FL-RAG", "fixed_length",
                                    {**loop, "n": 25, "first_retrieval": True}),
            "fixed_sentence": RunSpec(ds, "fixed_sentence", "FS-RAG", "fixed_sentence",
                                      {**loop, "first_retrieval": True}),
            "flare": RunSpec(ds, "flare", "FLARE", "flare",
                             {**loop, "trigger": "mean", "theta": flare_p, "beta": flare_p}),
            "dragin": RunSpec(ds, "dragin", "DRAGIN", "dragin", {
                **loop, "variant": "reference", "theta": released(paper_model, "dragin_threshold", ds),
                "query_words": released(paper_model, "dragin_query_words", ds), "chunk_tokens": budget,
            }),
        }
        runs += [by_key[k] for k in keys]
    return runs


def answer_columns(dataset: str) -> list[Column]:
    """EM and F1, or accuracy for a yes/no dataset (StrategyQA), as the paper reports them."""
    if dataset_spec(dataset).yes_no:
        return [Column("accuracy", "accuracy", "accuracy")]
    return [Column("EM", "em", "em"), Column("F1", "f1", "f1")]


DRAGIN_DATASETS = ["2wikimultihopqa", "hotpotqa", "strategyqa", "iirc"]
# Tables 2 and 3 run the paper's datasets and then the borrowed ones.
TABLE_DATASETS = DRAGIN_DATASETS + list(BORROWED_SETTINGS)
BORROWED_REMARKS = {ds: f"{ds} is not in the paper: its runs use {src}'s released settings, and it has no published cells."
                    for ds, src in BORROWED_SETTINGS.items()}
PAPER_SETTING = "first 1,000 dev questions, BM25 over Wikipedia (100-word passages), top-3"


def table2_claims(runs: list[RunSpec], results: dict) -> list[str]:
    """The paper's reading of Table 2: DRAGIN above every baseline, per dataset (paired permutation on
    each question's EM, or accuracy on StrategyQA, as the records hold it)."""
    claims = [Claim("DRAGIN above the baseline", "dragin", other, "em",
                    ledger=f"dragin.table2.dragin-above-{other.replace('_', '-')}")
              for other in ("direct", "single", "fixed_length", "fixed_sentence", "flare")]
    return tested_claims("Claims (the paper's: DRAGIN best; paired tests on these questions):", claims, runs,
                         None, results)


@TABLES.register("dragin-table2", DraginTableOptions, "DRAGIN Table 2: EM/F1 (StrategyQA accuracy) of six methods on the paper's four datasets and MuSiQue")
def dragin_table2(options: DraginTableOptions) -> Table:
    keys = ["direct", "single", "fixed_length", "fixed_sentence", "flare", "dragin"]
    runs = dragin_runs(options.paper_model, TABLE_DATASETS, keys)
    return Table(
        "dragin-table2", f"DRAGIN Table 2 ({options.paper_model})", TABLE_DATASETS, runs, answer_columns,
        paper_cells("dragin-table2", options.paper_model), f"{options.paper_model}, {PAPER_SETTING}", scorer="dragin",
        notes=[published()["tables"]["dragin-table2"]["source"]], paper_corpus=WIKIPEDIA_BM25, dataset_remarks=BORROWED_REMARKS,
        after=lambda results: table2_claims(runs, results),
    )


@TABLES.register("dragin-table3", DraginTableOptions, "DRAGIN Table 3: retrieval calls per question of the four dynamic methods")
def dragin_table3(options: DraginTableOptions) -> Table:
    keys = ["fixed_length", "fixed_sentence", "flare", "dragin"]
    return Table(
        "dragin-table3", f"DRAGIN Table 3 ({options.paper_model})", TABLE_DATASETS,
        dragin_runs(options.paper_model, TABLE_DATASETS, keys),
        lambda ds: [Column("retrievals/question", "retrievals_per_question", "retrievals", 2)],
        paper_cells("dragin-table3", options.paper_model), f"{options.paper_model}, {PAPER_SETTING}", scorer="dragin",
        notes=[published()["tables"]["dragin-table3"]["source"]], paper_corpus=WIKIPEDIA_BM25, dataset_remarks=BORROWED_REMARKS,
    )
