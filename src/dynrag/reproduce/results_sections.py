"""The results page's later sections (reproduce/results_page.py): the claims ledger with each claim's
latest verdict, the systems figures and the list of records, and how a record is marked (its link;
imported from the log; made by a commit that is not in HEAD's history)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dynrag.reproduce.ledger import PAPER_NAMES, Ledger
from dynrag.reproduce.records import ClaimResult, ResultRecord


@dataclass(frozen=True)
class Marks:
    link: Callable[[str], str]
    in_history: Callable[[str | None], bool | None]

    FOREIGN = "⚠"
    IMPORTED_SHORT = "↩"

    def foreign(self, record: ResultRecord) -> bool:
        """Made by a commit HEAD does not descend from (git could tell; the commit is recorded)."""
        return self.in_history(record.provenance.commit) is False

    def short(self, record: ResultRecord) -> str:
        """The marks a matrix cell carries after its link."""
        marks = [self.IMPORTED_SHORT] if record.provenance.imported_from else []
        marks += [self.FOREIGN] if self.foreign(record) else []
        return (" " + "".join(marks)) if marks else ""

    def long(self, record: ResultRecord) -> str:
        """The marks spelt out, after a record's link in a sentence."""
        marks = ["imported from the log"] if record.provenance.imported_from else []
        marks += [f"{self.FOREIGN} commit not in history"] if self.foreign(record) else []
        return f" ({'; '.join(marks)})" if marks else ""

    def cite(self, record: ResultRecord, text: str | None = None) -> str:
        """The record's link (its id, or ``text``) and its marks."""
        return f"[{text or record.id}]({self.link(record.id)}){self.long(record)}"


def legend(records: Sequence[ResultRecord], marks: Marks) -> list[str]:
    """What the short marks mean, under a list or table that shows any."""
    if not any(marks.short(r) for r in records):
        return []
    return [f"{Marks.IMPORTED_SHORT} imported from the log; {Marks.FOREIGN} commit not in history.", ""]


def _p(p: float) -> str:
    return f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


def result_text(record: ResultRecord, claim: ClaimResult, marks: Marks) -> str:
    """One decided claim: where, with which reader, the test, n, p and the verdict, and its record."""
    reader = f"reader `{record.reader}`" if record.reader else "no reader"
    corpus = f" ({record.corpus})" if record.corpus and record.corpus != "contexts" else ""
    return (f"{claim.dataset}{corpus}, {reader}, \"{claim.text}\": {claim.test}, n {claim.n}, p {_p(claim.p)}: "
            f"**{claim.verdict}** ({record.provenance.date}, [record]({marks.link(record.id)}){marks.short(record)})")


def claim_results(records: Sequence[ResultRecord], claim_id: str) -> list[tuple[ResultRecord, ClaimResult]]:
    """The latest result of ``claim_id`` for each reader, dataset, corpus and wording (one claim may
    be tested against several rows on one dataset), newest first."""
    latest: dict[tuple[str, str, str, str], tuple[ResultRecord, ClaimResult]] = {}
    for record in sorted(records, key=lambda r: (r.provenance.date, r.id)):
        for claim in record.claims:
            if claim.claim == claim_id:
                latest[(record.reader or "", claim.dataset, record.corpus or "", claim.text)] = (record, claim)
    # newest first; within a date, in reader, dataset, corpus and wording order
    ordered = sorted(latest.values(), key=lambda rc: (rc[0].reader or "", rc[1].dataset, rc[0].corpus or "", rc[1].text))
    return sorted(ordered, key=lambda rc: rc[0].provenance.date, reverse=True)


def ledger_line(claim_id: str, text: str, records: Sequence[ResultRecord], marks: Marks) -> str:
    """A ledger claim and its verdicts of the latest record date (how many earlier ones there are)."""
    found = claim_results(records, claim_id)
    if not found:
        return f"- `{claim_id}` {text}: not yet tested."
    newest = found[0][0].provenance.date
    shown = [rc for rc in found if rc[0].provenance.date == newest]
    earlier = f" ({len(found) - len(shown)} earlier)" if len(found) > len(shown) else ""
    return f"- `{claim_id}` {text}: " + "; ".join(result_text(r, c, marks) for r, c in shown) + earlier + "."


def ledger_section(ledger: Ledger, records: Sequence[ResultRecord], marks: Marks) -> list[str]:
    """Every claim of the ledger, grouped by paper and where in the paper it is made."""
    lines = ["## The claims ledger", ""]
    if not ledger.claims:
        return lines + ["The ledger (`src/dynrag/data/claims.json`) holds no claim yet.", ""]
    tested = sum(1 for c in ledger.claims if claim_results(records, c.id))
    lines += [f"{len(ledger.claims)} claims, {tested} tested on our data; each with its verdicts of the latest "
              "record date.", "", *legend([r for c in ledger.claims for r, _ in claim_results(records, c.id)], marks)]
    for paper in [p for p in PAPER_NAMES if any(c.paper == p for c in ledger.claims)]:
        lines += [f"### {PAPER_NAMES[paper]}", ""]
        claims = [c for c in ledger.claims if c.paper == paper]
        for source in sorted({c.source for c in claims}, key=_source_order):
            lines += [f"**{source}**", ""]
            lines += [ledger_line(c.id, c.text, records, marks)
                      for c in sorted((c for c in claims if c.source == source), key=lambda c: c.id)]
            lines.append("")
    return lines


def _source_order(source: str) -> tuple[str, int, str]:
    """"Table 2" before "Table 10": the kind, then the number."""
    kind, _, rest = source.partition(" ")
    number = rest.split()[0].rstrip(".,:") if rest else ""
    return (kind, int(number) if number.isdigit() else 0, source)


def systems_section(records: Sequence[ResultRecord], marks: Marks) -> list[str]:
    systems = sorted((r for r in records if r.kind == "systems"), key=lambda r: r.id)
    lines = ["## Systems figures", ""]
    if not systems:
        return lines + ["No systems record yet.", ""]
    for record in systems:
        lines += [f"### {record.title}", "", f"{record.table}; {record.provenance.date}; {marks.cite(record)}.", "",
                  "| figure | value | unit | note |", "| --- | ---: | --- | --- |"]
        lines += [f"| {f.name} | {f.value:g} | {f.unit} | {f.note or ''} |" for f in record.figures]
        lines.append("")
    return lines


def record_list(records: Sequence[ResultRecord], marks: Marks) -> list[str]:
    """Every record with its provenance: the command that made it, commit, load, wall time."""
    lines = ["## Records", ""]
    for r in sorted(records, key=lambda r: r.id):
        p = r.provenance
        made = f"`{p.command}`" if p.command else "command not recorded"
        if p.imported_from:
            made += f"; from {p.imported_from.file}, \"{p.imported_from.section}\""
        facts = [p.date, f"commit {p.commit[:10]}" if p.commit else "commit not recorded",
                 *([f"load {p.load}"] if p.load else []), *([f"{p.wall_s:.0f} s wall"] if p.wall_s else [])]
        sources = Counter(row.carried_from for row in r.rows if row.carried_from)
        # rows whose run directories were gone when this record was written, counted by where each came from
        if sources:
            facts.append("; ".join(f"{count} row{'s' if count > 1 else ''} carried from {source}"
                                   for source, count in sorted(sources.items())))
        lines.append(f"- {marks.cite(r)}: {r.title}. {made}; {', '.join(facts)}.")
    return lines + [""] if records else lines + ["None yet.", ""]
