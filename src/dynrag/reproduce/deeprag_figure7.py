"""DeepRAG's Figure 7: how many sub-questions DeepRAG writes per question and how many retrievals
it makes, as distributions, with the paper's two readings tested (most questions take 3-5
sub-questions; most retrievals counts are 0-2).

The rows are Table 1's deeprag rows (untrained, and the checkpoints when given), so a run made for
Table 1 is read here as it is. Counts come from each record's ``decisions`` (one per sub-question).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from dynrag.reproduce.deeprag import DeepragTableOptions, deeprag_runs
from dynrag.reproduce.tables import TABLES, WIKIPEDIA_BM25, Column, RunSpec, Table, published, records_of
from dynrag.reproduce.world_tests import verdict

TOP = 6  # the last column counts this many or more
DATASETS = ["hotpotqa", "2wikimultihopqa", "popqa", "musique"]
DEEPRAG_ROWS = ("deeprag_untrained", "deeprag_imi", "deeprag")  # Table 1's row keys of the method


def distribution(counts: list[int]) -> list[float]:
    """Share of questions with 0, 1, ..., TOP-1 and TOP or more."""
    c = Counter(min(n, TOP) for n in counts)
    return [c[k] / len(counts) for k in range(TOP + 1)] if counts else []


def most_in(counts: list[int], low: int, high: int) -> tuple[int, int, float, str]:
    """(questions in [low, high], questions, two-sided binomial p against a half, verdict that more than half are)."""
    from scipy.stats import binomtest

    inside = sum(low <= n <= high for n in counts)
    p = float(binomtest(inside, len(counts), 0.5).pvalue) if counts else 1.0
    return inside, len(counts), p, verdict(inside / len(counts) - 0.5 if counts else 0.0, p)


def figure_lines(runs: list[RunSpec], results: dict[tuple[str, str], Any]) -> list[str]:
    lines = []
    for spec in runs:
        records = records_of(results.get((spec.dataset, spec.key)))
        if not records:
            continue
        subs = [len(r.get("decisions") or []) for r in records]
        found = [int(r.get("retrievals") or 0) for r in records]
        header = [str(k) for k in range(TOP)] + [f"{TOP}+"]
        lines += ["", f"#### {spec.dataset}, {spec.label}: share of questions by count (n = {len(records)})", "",
                  "| count | " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in range(len(header) + 1)) + "|"]
        for name, counts in (("sub-questions", subs), ("retrievals", found)):
            lines.append(f"| {name} | " + " | ".join(f"{s:.2f}" for s in distribution(counts)) + " |")
        lines.append("")
        for what, counts, low, high in (("sub-questions", subs, 3, 5), ("retrievals", found, 0, 2)):
            inside, n, p, said = most_in(counts, low, high)
            lines.append(f"- Most questions take {low}-{high} {what}: {inside} of {n} ({inside / n:.2f}); binomial "
                         f"test against a half, p = {p:.3g}: **{said}**.")
    return lines


@TABLES.register("deeprag-figure7", DeepragTableOptions, "DeepRAG Figure 7: sub-questions and retrievals per question, as distributions")
def deeprag_figure7(options: DeepragTableOptions) -> Table:
    # Table 1's deeprag rows, with their CoT baseline so a run shared with Table 1 keeps its settings
    runs = [s for s in deeprag_runs(options, DATASETS) if s.key in (*DEEPRAG_ROWS, "cot")]
    columns = [Column("EM", "em", None), Column("F1", "f1", None),
               Column("retrievals/question", "retrievals_per_question", None, 2)]
    shown = [s for s in runs if s.key in DEEPRAG_ROWS]
    return Table(
        "deeprag-figure7", "DeepRAG Figure 7 (decomposition)", DATASETS, runs, lambda _: columns, {},
        "Llama-3-8B (as Table 1), BM25 over Wikipedia", paper_corpus=WIKIPEDIA_BM25,
        notes=[published()["tables"]["deeprag-figure7"]["source"]],
        after=lambda results: figure_lines(shown, results),
        carries_rows=False,  # its lines read each question's sub-questions
    )
