"""Figure 3's finding, decided once per metric: the reader trained on gold and random passages
(M_gr) covers the answer best when it is given gold (D_g) or mixed (D_gr) context.

The paper scores ground-truth coverage, chosen, it says, because QA answers are short: its
fine-tuned readers reply with the answer alone, so its coverage is that of a reply that *is* the
answer. Ours reason before they answer, which gives two readings:

- **extracted answer** (the headline): coverage of the answer the reply ends with. It is the
  reading the paper's wording supports: what it scores is an answer, short by design.
- **whole text**: coverage of everything the model wrote. A model that wanders names more
  candidates and wins on it without reading better, so it is printed, with its own verdict, but
  the finding rests on the extracted answer.

Each comparison pairs M_gr with another row on the same questions (exact McNemar on per-question
coverage). Per metric and context the verdict is *holds* when M_gr is above every other row with
p < 0.05, *does not hold* when some row is above M_gr with p < 0.05, and *undetermined* otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dynrag.reproduce.world_tests import Tested, mcnemar

METRICS = (("coverage", "extracted answer"), ("coverage_text", "whole text"))
CLAIMED_CONTEXTS = ("g", "gr")
TRAINED_ON_MIXED = "gr"


def _p(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def finding(comparisons: Sequence[Tested]) -> str:
    """The verdict of "M_gr is best" from its comparison with every other row."""
    if any(t.verdict == "does not hold" for t in comparisons):
        return "does not hold"
    if comparisons and all(t.verdict == "holds" for t in comparisons):
        return "holds"
    return "undetermined"


def compare(best: Mapping[str, Mapping[str, Any]], other: Mapping[str, Mapping[str, Any]], metric: str) -> Tested:
    """McNemar of ``best`` against ``other`` (records by question id) on the questions both answered."""
    ids = [i for i in best if i in other]
    return mcnemar([bool(best[i][metric]) for i in ids], [bool(other[i][metric]) for i in ids])


def figure3_claims(rows: Sequence[tuple[str, str, str]],
                   records: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]]) -> list[str]:
    """The claim lines: ``rows`` are (key, label, spec) as the table prints them, ``records`` each
    cell's per-question records by (row key, context)."""
    labels = {key: label for key, label, _ in rows}
    if TRAINED_ON_MIXED not in labels:
        return ["- M_gr is best with gold or mixed context: not run (give --reader gr=DIR, a `dynrag train "
                "reader --context gr` output)."]
    lines = []
    for metric, reading in METRICS:
        for context in CLAIMED_CONTEXTS:
            mine = {r["id"]: r for r in records.get((TRAINED_ON_MIXED, context), ())}
            others = [k for k in labels if k != TRAINED_ON_MIXED and records.get((k, context))]
            if not mine or not others:
                continue
            tests = [(k, compare(mine, {r["id"]: r for r in records[(k, context)]}, metric)) for k in others]
            parts = "; ".join(f"vs {labels[k]} {t.effect:+.3f}, n {t.n}, p {_p(t.p)}" for k, t in tests)
            lines.append(f"- M_gr covers the answer best under D_{context} ({reading}): {parts} "
                         f"(McNemar, exact): **{finding([t for _, t in tests])}**.")
    return lines or ["- M_gr is best with gold or mixed context: no cell of D_g or D_gr has answers yet."]
