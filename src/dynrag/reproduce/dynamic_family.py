"""`dynrag reproduce dynamic-family`: every training-free retrieving method of the registry on one
engine — single retrieval, the fixed schedules, FLARE, both DRAGIN variants, IRCoT, SeaKR and ETC —
on a generated world's test split (``--world DIR``, with its per-decision scoring) or on the
HotpotQA and 2WikiMultihopQA dev slices (``--data``/``--data-dir``), each method set against DRAGIN
by an exact McNemar test on the questions both answered.

Rows reuse the settings of the tables they share with, so their run directories are shared too:
on the world, `reproduce world`'s; on the benchmarks, DRAGIN Table 2's released settings for its
five rows, and for the rest the same answer budget with each method's own paper defaults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from dynrag.reproduce.dragin import PAPER_SETTING, UNCAPPED, DraginTableOptions, dragin_runs
from dynrag.reproduce.tables import TABLES, WIKIPEDIA_BM25, Column, RunSpec, Table, paper_cells, published, records_of
from dynrag.reproduce.world import DATASET as WORLD, RD, WorldTableOptions, world_or, world_runs
from dynrag.reproduce.world_claims import em_comparison, line, paired, question_mcc

NAME = "dynamic-family"
BENCHMARKS = ["hotpotqa", "2wikimultihopqa"]
ANCHOR = "dragin"  # the row every other is tested against: DRAGIN as its authors' code runs it

# Row key -> label, in the table's order; one label per row whatever the dataset.
LABELS = {
    "single": "single retrieval (SR-RAG)",
    "fixed_length": "FL-RAG",
    "fixed_sentence": "FS-RAG",
    "flare": "FLARE",
    ANCHOR: "DRAGIN (reference variant)",
    "dragin_paper": "DRAGIN (paper variant)",
    "ircot": "IRCoT",
    "seakr": "SeaKR",
    "etc": "ETC",
}
# The world table's keys of the rows this table shares with it: its `dragin` is the paper variant.
WORLD_KEYS = {"single": "single", "fixed_length": "fixed_length", "fixed_sentence": "fixed_sentence",
              "flare": "flare", "dragin_reference": ANCHOR, "dragin": "dragin_paper"}
NEWER = ("ircot", "seakr", "etc")  # the methods not in DRAGIN's or the world's tables

# Each row against DRAGIN: (row, the row is the one claimed ahead, whose claim, ledger id). DRAGIN's
# Table 2 claims it beats its baselines; SeaKR's and ETC's papers claim to beat DRAGIN; the rest
# are our questions, put the way DRAGIN's claims go.
COMPARED = (
    *((key, False, "DRAGIN Table 2", f"dragin.table2.dragin-above-{key.replace('_', '-')}")
      for key in ("single", "fixed_length", "fixed_sentence", "flare")),
    ("dragin_paper", False, "ours: the released code against the paper's description", None),
    ("ircot", False, "ours", None),
    ("seakr", True, "SeaKR's claim", None),
    ("etc", True, "ETC's claim", None),
)


def world_rows() -> list[RunSpec]:
    """The world's rows: `reproduce world`'s settings (top-3, each method's defaults, scorer
    squad) for the rows it has, the newer methods at their defaults with top-3."""
    shared = {WORLD_KEYS[s.key]: s for s in world_runs(WorldTableOptions()) if s.key in WORLD_KEYS}
    newer = {key: RunSpec(WORLD, key, "", key, {"k": 3}) for key in NEWER}
    rows = {**shared, **newer}
    return [replace(rows[key], key=key, label=label, scorer="squad", directory=rows[key].directory or rows[key].key)
            for key, label in LABELS.items()]


def benchmark_rows(paper_model: str) -> list[RunSpec]:
    """HotpotQA's and 2Wiki's rows: DRAGIN Table 2's runs with the released settings of
    ``paper_model``; DRAGIN's paper variant in the same loop at its own threshold; IRCoT and SeaKR
    at their papers' defaults; ETC, whose released code is DRAGIN's loop with another trigger, in
    that loop. Every row has the released answer budget and top-3."""
    budgets = published()["released_settings"]["dragin"]["generate_max_length"]
    by_dataset: dict[str, dict[str, RunSpec]] = {ds: {} for ds in BENCHMARKS}
    for spec in dragin_runs(paper_model, BENCHMARKS, ["single", "fixed_length", "fixed_sentence", "flare", ANCHOR]):
        by_dataset[spec.dataset][spec.key] = spec
    for ds, rows in by_dataset.items():
        loop = {**UNCAPPED, "max_new_tokens": budgets[ds], "max_query_tokens": 64}
        own = {"k": 3, "max_new_tokens": budgets[ds]}
        rows.update({
            "dragin_paper": RunSpec(ds, "dragin_paper", "", "dragin", {**loop, "variant": "paper"}),
            "ircot": RunSpec(ds, "ircot", "", "ircot", dict(own)),
            "seakr": RunSpec(ds, "seakr", "", "seakr", dict(own)),
            "etc": RunSpec(ds, "etc", "", "etc", dict(loop)),
        })
    return [replace(by_dataset[ds][key], label=label) for ds in BENCHMARKS for key, label in LABELS.items()]


WORLD_COLUMNS = [
    Column("EM", "em", None), Column("F1", "f1", None),
    Column("retrievals/question", "retrievals_per_question", None, 2),
    Column("question MCC", f"{RD}.mcc", None),  # did not retrieve vs no hop unknown
    Column("s/question", "wall_seconds_per_question", None, 2),  # the row's wall time over its questions
]
BENCHMARK_COLUMNS = [
    Column("EM", "em", "em"), Column("F1", "f1", "f1"),
    Column("retrievals/question", "retrievals_per_question", "retrievals", 2),
    Column("s/question", "wall_seconds_per_question", None, 2),
]


def columns(dataset: str) -> list[Column]:
    return WORLD_COLUMNS if dataset == WORLD else BENCHMARK_COLUMNS


Records = Sequence[Mapping[str, Any]]


def against_dragin(dataset: str, rows: Mapping[str, Records | None], labels: Mapping[str, str]) -> list[str]:
    """Each row against DRAGIN on ``dataset``: exact McNemar on the right/wrong answers of the
    questions both rows answered, the verdict read the way the claim goes."""
    dragin = rows.get(ANCHOR)
    if not dragin:
        return []
    lines = []
    for key, claimed_ahead, whose, ledger in COMPARED:
        other = rows.get(key)
        if not other:
            continue
        ahead, behind = (other, dragin) if claimed_ahead else (dragin, other)
        pairs = paired(ahead, behind, lambda r: True)
        if not pairs:
            continue
        tested, figures = em_comparison(pairs)
        names = (labels[key], labels[ANCHOR]) if claimed_ahead else (labels[ANCHOR], labels[key])
        lines.append(line(f"{names[0]} answers more than {names[1]} ({whose})", figures, tested, ledger=ledger,
                          dataset=dataset, prefix=f"{dataset}: "))
    return lines


def decision_mcc(rows: Mapping[str, Records | None], labels: Mapping[str, str]) -> list[str]:
    """Each world row's question MCC with a 95% bootstrap interval, so two rows' decisions can be
    told apart (or not) at a glance."""
    return [f"- {labels[key]}: {question_mcc(records)}" for key, records in rows.items() if records]


def after_lines(runs: list[RunSpec], datasets: list[str], results: dict[tuple[str, str], Any]) -> list[str]:
    labels = {s.key: s.label for s in runs}
    claims, mccs = [], []
    for ds in datasets:
        rows = {s.key: records_of(results.get((ds, s.key))) for s in runs if s.dataset == ds}
        claims += against_dragin(ds, rows, labels)
        if ds == WORLD:
            mccs = decision_mcc(rows, labels)
    lines = []
    if claims:
        lines += ["", "### Each method against DRAGIN", "",
                  "Exact McNemar test on each question's EM, paired on the questions both rows answered; **holds** "
                  "when the row claimed ahead is ahead at p < 0.05, **does not hold** when it is behind at p < 0.05, "
                  "**undetermined** otherwise.", "", *claims]
    if mccs:
        lines += ["", "### Question MCC on the world (did not retrieve vs needed nothing), 95% bootstrap interval",
                  "", *mccs]
    return lines


@TABLES.register(NAME, DraginTableOptions, "every training-free method (SR-RAG, FL-RAG, FS-RAG, FLARE, both DRAGINs, IRCoT, SeaKR, ETC) on a world or HotpotQA and 2Wiki, each against DRAGIN by McNemar")
def dynamic_family(options: DraginTableOptions) -> Table:
    runs = world_rows() + benchmark_rows(options.paper_model)
    datasets = [WORLD, *BENCHMARKS]
    return Table(
        NAME, "The dynamic-retrieval family on one engine", datasets, runs, columns,
        paper_cells(NAME, options.paper_model),
        f"{options.paper_model} (DRAGIN Tables 2 and 3: SR-RAG, FL-RAG, FS-RAG, FLARE, DRAGIN), {PAPER_SETTING}; "
        "no published cells for the world, DRAGIN's paper variant, IRCoT, SeaKR or ETC",
        scorer="dragin", notes=[published()["tables"][NAME]["source"]], paper_corpus=WIKIPEDIA_BM25,
        remarks=["World rows run with `reproduce world`'s settings (top-3, each method's defaults, scorer squad); "
                 "HotpotQA and 2Wiki rows with DRAGIN Table 2's released settings for its five rows and, for the "
                 "others, the same answer budget with each method's own defaults (scorer dragin). s/question is "
                 "the row's wall time over its questions, model loading included."],
        prepare=world_or(BENCHMARKS), after=lambda results: after_lines(runs, datasets, results),
    )
