"""The repository's results page and records agree with what they are made from: docs/results.md is
what `dynrag results` renders from results/, each record's published cells are data/published.json's,
and every claim a record names is in the ledger."""

from __future__ import annotations

from pathlib import Path

from dynrag.reproduce.ledger import load_ledger
from dynrag.reproduce.records import load_records
from dynrag.reproduce.results_page import page_inputs, render_page
from dynrag.reproduce.tables import published

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "results"
PAGE = REPO / "docs" / "results.md"

def test_the_results_page_is_what_dynrag_results_renders():
    page = render_page(page_inputs(RESULTS, PAGE, load_ledger(), load_records(RESULTS)))
    assert PAGE.is_file(), "docs/results.md is missing: run `dynrag results`"
    assert PAGE.read_text(encoding="utf-8") == page, "docs/results.md is stale or hand-edited: run `dynrag results`"


def _nonempty(cells: dict) -> dict:
    return {ds: rows for ds, rows in cells.items() if rows}


def test_every_records_published_cells_are_the_typed_ones():
    for record in load_records(RESULTS):
        if record.published_group is None:
            assert record.published == {}, record.id
            continue
        typed = published()["tables"][record.table]["cells"][record.published_group]
        keys = {(row.dataset, row.key) for row in record.rows}
        expected = {ds: {key: cells for key, cells in typed.get(ds, {}).items() if (ds, key) in keys}
                    for ds in record.datasets}
        assert _nonempty(record.published) == _nonempty(expected), record.id


def test_every_claim_a_record_names_is_in_the_ledger():
    ids = load_ledger().ids()
    for record in load_records(RESULTS):
        named = {c.claim for c in record.claims if c.claim is not None}
        assert named <= ids, (record.id, sorted(named - ids))


def test_every_imported_record_names_a_section_of_the_notebook():
    """An imported figure is only as good as the entry it came from: that entry must exist."""
    headings = {line[3:].strip() for line in (REPO / "benchmarks" / "LOG.md").read_text(encoding="utf-8").splitlines()
                if line.startswith("## ")}
    imported = [r for r in load_records(RESULTS) if r.provenance.imported_from is not None]
    assert imported
    for record in imported:
        source = record.provenance.imported_from
        assert source.file == "benchmarks/LOG.md", record.id
        assert source.section in headings, (record.id, source.section)
