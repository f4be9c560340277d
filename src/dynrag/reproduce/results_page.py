"""`dynrag results`: docs/results.md rendered from the result records (``results/*.json``) and the
claims ledger (``data/claims.json``).

The first screen answers what a newcomer asks first: per reader, each method's EM, F1, retrievals a
question and n on each dataset, the best EM of each column in bold, and the headline verdicts. Then
the setup, the whole ledger with each claim's latest verdict, the systems figures and the records
themselves. Every figure links to the record it came from. The page is a pure function of the
records, the ledger and what git says of each record's commit, so a test can compare it with the
committed file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from dynrag.errors import DynragError
from dynrag.reproduce.ledger import Ledger
from dynrag.reproduce.records import ResultRecord, Row
from dynrag.reproduce.results_sections import (
    Marks,
    claim_results,
    legend,
    ledger_section,
    record_list,
    result_text,
    systems_section,
)

TITLE = "# Results"
INTRO = ("Every figure below is read from a result record in `results/` (one small JSON file per reproduced "
         "table or systems measurement, written by `dynrag reproduce TABLE --results results/` or imported from "
         "the lab notebook, benchmarks/LOG.md) and every claim from the claims ledger, "
         "`src/dynrag/data/claims.json`. `dynrag results` renders this page; do not edit it by hand "
         "(docs/results-records.md). Each cell links to its record; EM and F1 are fractions, r/q is "
         "retrievals a question, n the questions a row answered.")

# The table whose rows are the methods side by side on the benchmarks: the first screen's matrices
# (the world's and the others' rows follow further down, so the first screen stays one screen).
FIRST_SCREEN = ("dragin-table2",)

# The claims a newcomer asks about first, by ledger id, in the order shown.
HEADLINES = (
    ("DRAGIN beats FLARE", "dragin.table2.dragin-above-flare"),
    ("DRAGIN beats single retrieval", "dragin.table2.dragin-above-single"),
    ("DRAGIN beats closed book", "dragin.table2.dragin-above-direct"),
)


@dataclass(frozen=True)
class PageInputs:
    records: Sequence[ResultRecord]
    ledger: Ledger
    link: Callable[[str], str]  # record id -> the relative link to its file
    in_history: Callable[[str | None], bool | None]  # commit -> in HEAD's history (None: cannot tell)


def column_of(record: ResultRecord, row: Row) -> str:
    """A matrix column: the dataset, with its corpus when that is not the pooled contexts."""
    corpus = record.corpus or "contexts"
    return row.dataset if corpus == "contexts" else f"{row.dataset} ({corpus})"


def reader_of(record: ResultRecord) -> str:
    """The reader model without its model options: `?backend=llama.cpp` runs the same weights."""
    from dynrag.lm.spec import ModelSpec

    if not record.reader:
        return ""
    try:
        return ModelSpec.parse(record.reader).base
    except DynragError:  # a spec this version cannot parse is still a name
        return record.reader


def _em(row: Row) -> float | None:
    return row.cells.get("em", row.cells.get("accuracy"))


def _f(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def answer_rows(record: ResultRecord) -> list[Row]:
    """The rows that answered questions (EM, or accuracy on a yes/no dataset); retrieval-only and
    figure rows have other cells and stay out of the matrices."""
    return [row for row in record.rows if _em(row) is not None and ("em" in row.cells or "f1" not in row.cells)]


def chosen_cells(records: Sequence[ResultRecord]) -> dict[tuple[str, str], dict[str, tuple[ResultRecord, Row]]]:
    """(table, row key) -> column -> the record and row shown: of several, the one with the most
    questions, then the latest, so a quick 30-question check never hides a 100-question run."""
    cells: dict[tuple[str, str], dict[str, tuple[ResultRecord, Row]]] = {}
    for record in records:
        for row in answer_rows(record):
            slot = cells.setdefault((record.table, row.key), {})
            column = column_of(record, row)
            mine = (row.n or 0, record.provenance.date, record.id)
            if column not in slot or mine > (slot[column][1].n or 0, slot[column][0].provenance.date, slot[column][0].id):
                slot[column] = (record, row)
    return cells


def reader_matrix(records: Sequence[ResultRecord], marks: Marks) -> list[str]:
    """Method × dataset for one reader's table records; the best EM of each column in bold."""
    cells = chosen_cells(records)
    columns = sorted({c for by_column in cells.values() for c in by_column})
    best = {c: max((e for by_column in cells.values() if c in by_column
                    if (e := _em(by_column[c][1])) is not None), default=None) for c in columns}
    lines = ["| method | table | " + " | ".join(f"{c}: EM / F1 / r/q (n)" for c in columns) + " |",
             "|" + "|".join(" --- " for _ in range(len(columns) + 2)) + "|"]
    label = {key: next(iter(by_column.values()))[1].label for key, by_column in cells.items()}
    for key in sorted(cells, key=lambda k: (k[0], label[k].lower(), k[1])):
        row_cells = []
        for c in columns:
            if c not in cells[key]:
                row_cells.append("")
                continue
            record, row = cells[key][c]
            em = _em(row)
            shown = _f(em, 3) if "em" in row.cells else f"acc {em:.3f}"
            if em == best[c]:
                shown = f"**{shown}**"
            text = f"{shown} / {_f(row.cells.get('f1'), 3)} / {_f(row.cells.get('retrievals'), 2)} ({row.n or '–'})"
            row_cells.append(f"[{text}]({marks.link(record.id)}){marks.short(record)}")
        lines.append(f"| {label[key]} | {key[0]} | " + " | ".join(row_cells) + " |")
    return lines


def matrices(records: Sequence[ResultRecord], marks: Marks, tables: Sequence[str] | None) -> list[str]:
    """One matrix per reader over the answering rows of ``tables`` (None: every table)."""
    chosen = [r for r in records if r.kind == "table" and answer_rows(r) and (tables is None or r.table in tables)]
    lines = []
    for reader in sorted({reader_of(r) for r in chosen}):
        lines += [f"### Reader `{reader}`" if reader else "### Reader not recorded", "",
                  *reader_matrix([r for r in chosen if reader_of(r) == reader], marks), ""]
    return lines + legend(chosen, marks)



def first_screen(inputs: PageInputs, marks: Marks) -> list[str]:
    shown = matrices(inputs.records, marks, FIRST_SCREEN)
    lines = ["## Which method is best, per reader", "",
             f"The methods side by side in {' and '.join(FIRST_SCREEN)} (each cell: the record with the most "
             "questions); the world's and every other table's rows are under \"Every table, per reader\".", "",
             *(shown or ["No record of these tables yet: run `dynrag reproduce TABLE --results results/`, then "
                         "`dynrag results`.", ""])]
    lines += ["### Headline verdicts", ""]
    cited = []
    for title, claim_id in HEADLINES:
        found = claim_results(inputs.records, claim_id)
        if not found:
            lines.append(f"- {title}: not yet tested.")
        for record, claim in found:
            lines.append(f"- {title}: {result_text(record, claim, marks)}")
            cited.append(record)
    return lines + ["", *legend(cited, marks)]


def setup_section(records: Sequence[ResultRecord]) -> list[str]:
    """Machines, readers and data slices the records were measured with."""
    machines = sorted({r.provenance.machine for r in records if r.provenance.machine})
    readers = sorted({r.reader for r in records if r.reader})
    slices = set()
    for r in records:
        sizes = sorted({row.n for row in r.rows if row.n})
        size = f", n {'/'.join(map(str, sizes))}" if sizes else ""
        data = f": `{r.provenance.data}`" if r.provenance.data else ""
        sha = f" (sha256 {r.provenance.data_sha256[:12]}…)" if r.provenance.data_sha256 else ""
        if r.datasets:
            slices.add(f"{', '.join(r.datasets)} ({r.corpus or 'corpus not recorded'}{size}){data}{sha}")
    return ["## Setup", "",
            f"> **Machines:** {'; '.join(machines) or 'not recorded'}  ",
            f"> **Readers:** {', '.join(f'`{x}`' for x in readers) or 'none recorded'}  ",
            "> **Data slices:**  ",
            *(f"> - {s}" for s in sorted(slices) or ["none recorded"]), ""]


def render_page(inputs: PageInputs) -> str:
    marks = Marks(inputs.link, inputs.in_history)
    # A shard's record answers a fraction of each row's questions: listed, but no figure or verdict
    # of it is shown until its row is joined into the whole table's record.
    whole = [r for r in inputs.records if r.shard is None]
    lines = [TITLE, "", INTRO, "", *first_screen(replace(inputs, records=whole), marks), *setup_section(whole),
             *ledger_section(inputs.ledger, whole, marks), *systems_section(whole, marks),
             "## Every table, per reader", "", *matrices(whole, marks, None),
             *record_list(inputs.records, marks)]
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


def page_inputs(records_dir: Path, out: Path, ledger: Ledger, records: Sequence[ResultRecord]) -> PageInputs:
    """The page's inputs with links relative to ``out`` and git asked about each commit once."""
    from functools import lru_cache

    from dynrag.reproduce.provenance import is_ancestor

    root = records_dir.resolve()

    @lru_cache(maxsize=None)
    def in_history(commit: str | None) -> bool | None:
        return None if not commit else is_ancestor(commit, root if root.is_dir() else Path.cwd())

    def link(record_id: str) -> str:
        return Path(os.path.relpath(root / f"{record_id}.json", out.resolve().parent)).as_posix()

    return PageInputs(records, ledger, link, in_history)
