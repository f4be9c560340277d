"""DeepRAG's ablations: Figure 5 (which correct narrative of each synthesis tree trains stage I) and
Figure 6 (which preference pairs train stage II). Each row is `deeprag` with one checkpoint, on
HotpotQA and 2Wiki, or with `--world DIR` on a generated world's test split, where the checkpoints
can be trained and the decisions checked per hop. The paper's readings of both figures are decided
by paired tests on the rows' per-question records.
"""

from __future__ import annotations

from pydantic import Field

from dynrag.errors import ConfigError
from dynrag.registry import Options
from dynrag.reproduce.claims import Claim, tested_claims
from dynrag.reproduce.deeprag import DEEPRAG_SETTING, deeprag_options
from dynrag.reproduce.tables import TABLES, Column, RunSpec, Table, paper_cells, published
from dynrag.reproduce.world import COLUMNS as WORLD_COLUMNS, DATASET as WORLD, world_or

BENCHMARKS = ["hotpotqa", "2wikimultihopqa"]
COLUMNS = [Column("EM", "em", None), Column("F1", "f1", None),
           Column("retrievals/question", "retrievals_per_question", None, 2)]
# On a world, where each hop is known or not: where the checkpoint retrieves, and whether its
# decisions pick out the unknown hops.
WORLD_DECISION_COLUMNS = [c for c in WORLD_COLUMNS if c.ours in (
    "retrieval_decisions.retrievals_all_known", "retrieval_decisions.retrievals_needs_retrieval",
    "retrieval_decisions.per_hop.mcc")]


class ImitationAblationOptions(Options):
    min: str | None = Field(None, description="stage-I checkpoint trained on `synth --select min` (the default, fewest retrievals)")
    max: str | None = Field(None, description="stage-I checkpoint trained on `synth --select max` (most retrievals)")
    random: str | None = Field(None, description="stage-I checkpoint trained on `synth --select random`")


class CalibrationAblationOptions(Options):
    optimal: str | None = Field(None, description="stage-II checkpoint trained with `--pairs optimal` (the default)")
    all_nodes: str | None = Field(None, description="stage-II checkpoint trained with `--pairs all-nodes`")
    sentence_order: str | None = Field(None, description="stage-II checkpoint trained with `--pairs sentence-order`")
    response: str | None = Field(None, description="stage-II checkpoint trained with `--pairs response`")


prepare = world_or(BENCHMARKS)  # with --world: the world's test split only; without: the benchmarks


def columns(dataset: str) -> list[Column]:
    return COLUMNS + WORLD_DECISION_COLUMNS if dataset == WORLD else COLUMNS


def average_lines(rows: list[tuple[str, str, str | None]], datasets: list[str], results: dict) -> list[str]:
    """The figure's bars: each row's EM, F1 and retrievals averaged over the datasets it ran on
    (the paper plots this average), with the datasets named."""
    lines = ["", "### Average over the datasets (what the figure plots)", "",
             "| method | datasets | EM | F1 | retrievals/question |", "| --- | --- | --- | --- | --- |"]
    for key, label, _ in rows:
        done = [(ds, results[(ds, key)]) for ds in datasets if results.get((ds, key))]
        if not done:
            continue
        mean = {m: sum(float(r[m]) for _, r in done) / len(done) for m in ("em", "f1", "retrievals_per_question")}
        lines.append(f"| {label} | {', '.join(ds for ds, _ in done)} | {mean['em']:.3f} | {mean['f1']:.3f} | "
                     f"{mean['retrievals_per_question']:.2f} |")
    return lines if len(lines) > 5 else []


def _ablation(name: str, title: str, rows: list[tuple[str, str, str | None]], option_help: str,
              claims: list[Claim], claims_heading: str) -> Table:
    """`deeprag` (k = 3, its own decisions) once per given checkpoint, on each dataset."""
    given = [(key, label, model) for key, label, model in rows if model]
    if not given:
        raise ConfigError(f"{name} compares checkpoints: give at least one of {option_help}")
    datasets = [*BENCHMARKS, WORLD]
    runs = [RunSpec(ds, key, label, "deeprag", deeprag_options(ds), model=model)
            for ds in datasets for key, label, model in given]
    return Table(name, title, datasets, runs, columns, paper_cells(name, "paper"),
                 f"Llama-3-8B (as Table 1), average over the test sets, {DEEPRAG_SETTING}",
                 notes=[published()["tables"][name]["source"]], prepare=prepare,
                 after=lambda results: average_lines(given, datasets, results)
                 + tested_claims(claims_heading, claims, runs, datasets, results))


@TABLES.register("deeprag-figure5", ImitationAblationOptions, "DeepRAG Figure 5: stage-I checkpoints trained on the fewest-, most- and random-retrieval narratives")
def deeprag_figure5(options: ImitationAblationOptions) -> Table:
    rows = [("imi_min", "DeepRAG-Imi, fewest retrievals (min)", options.min),
            ("imi_max", "most retrievals (max)", options.max),
            ("imi_random", "random correct narrative (random)", options.random)]
    claims = [claim for other in ("imi_max", "imi_random") for claim in (
        Claim("the fewest-retrieval narratives train a better reader", "imi_min", other, "em",
              ledger="deeprag.figure5.min-paths-score-higher"),
        Claim("they train one that retrieves less", other, "imi_min", "retrievals",
              ledger="deeprag.figure5.min-paths-retrieve-less"))]
    return _ablation("deeprag-figure5", "DeepRAG Figure 5 (imitation path selection)", rows,
                     "--option min=MODEL, --option max=MODEL, --option random=MODEL", claims,
                     "Claims (the paper's: min answers better and retrieves less than max and random; exact "
                     "McNemar on EM, paired permutation on retrievals, on these questions):")


@TABLES.register("deeprag-figure6", CalibrationAblationOptions, "DeepRAG Figure 6: stage-II checkpoints trained on each kind of preference pair")
def deeprag_figure6(options: CalibrationAblationOptions) -> Table:
    rows = [("coc_optimal", "DeepRAG, optimal-path nodes (optimal)", options.optimal),
            ("coc_all_nodes", "all nodes (all-nodes)", options.all_nodes),
            ("coc_sentence_order", "sentence-level order (sentence-order)", options.sentence_order),
            ("coc_response", "whole responses (response)", options.response)]
    better = "deeprag.figure6.optimal-pairs-score-higher"
    claims = [Claim("optimal-path pairs train a better reader", "coc_optimal", "coc_all_nodes", "em", ledger=better),
              Claim("and one that retrieves less", "coc_all_nodes", "coc_optimal", "retrievals",
                    ledger="deeprag.figure6.optimal-pairs-retrieve-less"),
              Claim("optimal-path pairs train a better reader", "coc_optimal", "coc_sentence_order", "em", ledger=better),
              Claim("sentence-order pairs lean on memory: fewer retrievals", "coc_optimal", "coc_sentence_order",
                    "retrievals", ledger="deeprag.figure6.sentence-order-over-relies-memory")]
    return _ablation("deeprag-figure6", "DeepRAG Figure 6 (calibration preference pairs)", rows,
                     "--option optimal=MODEL, all_nodes=MODEL, sentence_order=MODEL, response=MODEL", claims,
                     "Claims (the paper's: optimal answers best, retrieves less than all-nodes, and sentence-order "
                     "pairs retrieve least and answer worst; exact McNemar on EM, paired permutation on retrievals; the "
                     "response row is ours, with no claim):")
