"""The claims `reproduce world` decides, each by a test on the runs' per-question records
(predictions.jsonl), with n, the effect, the test, p and *holds*, *does not hold* or *undetermined*
(reproduce/world_tests.py). Records are keyed by the table's row keys; a row not run is None.

A record carries (eval/summary.py, datasets/world_decisions.py): ``id``, ``em``, ``retrievals``,
``needs_retrieval``, ``hops`` [{entity, known}], ``decisions`` [{subquery, retrieve}] and
``queries``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dynrag.datasets.boundary import confusion
from dynrag.datasets.world_decisions import known_and_unknown
from dynrag.datasets.world_hops import names_unknown_entity
import numpy as np

from dynrag.reproduce.claims import ClaimLine, Decided
from dynrag.reproduce.world_tests import (
    Tested,
    fisher_association,
    lower_mean,
    mcc_interval,
    mcc_of,
    mcnemar,
    paired_lower,
)

DATASET = "world"  # the world table's one dataset (reproduce/world.py)
Records = Sequence[Mapping[str, Any]]
RIND_ON_NEED = "dragin.section3.rind-retrieves-on-need"
Rows = Mapping[str, Records | None]

DRAGINS = (("dragin", "DRAGIN (paper variant)"), ("dragin_reference", "DRAGIN (reference variant)"))
DEEPRAGS = (("deeprag", "DeepRAG (stage II)"), ("deeprag_imi", "DeepRAG-Imi (stage I)"),
            ("deeprag_untrained", "deeprag untrained"))


def _p(p: float) -> str:
    return f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


def line(text: str, figures: str, tested: Tested, ledger: str | None = None, dataset: str = DATASET,
         prefix: str = "") -> ClaimLine:
    """The printed line (``prefix`` before the text, e.g. the dataset of a table with several),
    carrying its decision for the run's result record (``ledger``: the claim's id in
    data/claims.json, where the ledger has it)."""
    return ClaimLine(f"- {prefix}{text}: {figures}; {tested.test}, n {tested.n}, p {_p(tested.p)}: "
                     f"**{tested.verdict}**.",
                     Decided(text, dataset, tested.test, tested.n, tested.p, tested.effect, tested.verdict, ledger))


def hop_count(r: Mapping[str, Any]) -> int:
    return len(r.get("hops") or [])


def is_right(r: Mapping[str, Any]) -> bool:
    return float(r.get("em") or 0.0) >= 1.0


def paired(a: Records, b: Records, keep: Callable[[Mapping[str, Any]], bool]) -> list[tuple[Mapping, Mapping]]:
    """The questions both rows answered, in ``a``'s order, where ``keep`` holds."""
    by_id = {r["id"]: r for r in b}
    return [(r, by_id[r["id"]]) for r in a if r["id"] in by_id and keep(r)]


def em_comparison(pairs: list[tuple[Mapping, Mapping]]) -> tuple[Tested, str]:
    """McNemar on the paired right/wrong answers (first row against second), and both EMs as text."""
    a, b = [is_right(x) for x, _ in pairs], [is_right(y) for _, y in pairs]
    return mcnemar(a, b), f"EM {sum(a) / len(a):.3f} vs {sum(b) / len(b):.3f}"


def retrieval_follows_knowledge(rows: Rows) -> list[str]:
    """(i) DRAGIN and FLARE retrieve less where the model knows: all-known against needs-retrieval
    questions with the same number of hops (hop count and knowledge not mixed up)."""
    text = "(i) {name} retrieves less on {hops}-hop questions the model knows than on those it needs to look up"
    lines = []
    # DRAGIN's rows test the ledger's RIND claim; FLARE's line is ours
    for (key, name), ledger in (*((d, RIND_ON_NEED) for d in DRAGINS), (("flare", "FLARE"), None)):
        records = rows.get(key)
        if records is None:
            continue
        counts = sorted({hop_count(r) for r in records if r.get("needs_retrieval") is not None})
        for hops in counts:
            group = [r for r in records if hop_count(r) == hops]
            known = [float(r["retrievals"]) for r in group if r.get("needs_retrieval") is False]
            needs = [float(r["retrievals"]) for r in group if r.get("needs_retrieval") is True]
            if not known or not needs:
                continue
            tested = lower_mean(known, needs)
            lines.append(line(text.format(name=name, hops=hops),
                              f"{sum(known) / len(known):.2f} vs {sum(needs) / len(needs):.2f} retrievals/question "
                              f"({len(known)} known, {len(needs)} to look up)", tested, ledger=ledger))
    if not lines:
        return ["- (i) retrieval follows knowledge: no DRAGIN or FLARE row with known and unknown questions "
                "of the same hop count."]
    return lines + ["  (Contested: DeepRAG's Table 3 finds FLARE's and DRAGIN's decisions uncorrelated with "
                    "what the model knows, MCC near 0.)"]


# DRAGIN Table 2's baselines, as the world table names its rows: DRAGIN claims EM above each on
# multi-hop sets.
BASELINES = (("single", "single retrieval"), ("fixed_length", "FL-RAG"), ("fixed_sentence", "FS-RAG"), ("flare", "FLARE"))


def dragin_beats_single(rows: Rows) -> list[str]:
    """(ii) DRAGIN's EM on multi-hop questions is above each baseline's of its Table 2 (paired, McNemar)."""
    lines = []
    for key, name in DRAGINS:
        for base, base_name in BASELINES:
            if rows.get(key) is None or rows.get(base) is None:
                continue
            pairs = paired(rows[key], rows[base], lambda r: hop_count(r) >= 2)
            if not pairs:
                continue
            tested, figures = em_comparison(pairs)
            lines.append(line(f"(ii) {name} answers more multi-hop questions than {base_name}", figures, tested,
                              ledger=f"dragin.table2.dragin-above-{base.replace('_', '-')}"))
    return lines or ["- (ii) DRAGIN against the baselines of its Table 2 on multi-hop questions: a row was not run."]


def stage_two_retrieves_less(rows: Rows) -> list[str]:
    """(iii) stage II retrieves less than stage I (paired permutation on retrievals) at equal or
    better EM (McNemar: *does not hold* only if stage II is worse), each row's question MCC with a
    bootstrap interval."""
    two, one = rows.get("deeprag"), rows.get("deeprag_imi")
    text = "(iii) DeepRAG stage II retrieves less than stage I"
    if two is None or one is None:
        return [f"- {text}: not run (give --option imitation=CKPT and --option calibration=CKPT)."]
    pairs = paired(two, one, lambda r: True)
    fewer = paired_lower([float(a["retrievals"]) for a, _ in pairs], [float(b["retrievals"]) for _, b in pairs])
    better, _ = em_comparison(pairs)
    both = combined(fewer.verdict, better.verdict)
    lines = [line(text, f"{sum(a['retrievals'] for a, _ in pairs) / len(pairs):.2f} vs "
                        f"{sum(b['retrievals'] for _, b in pairs) / len(pairs):.2f} retrievals/question", fewer,
                  ledger="deeprag.table2.stage2-fewer-than-stage1"),
             line("(iii) DeepRAG stage II answers more than stage I", f"EM change {better.effect:+.3f}", better,
                  ledger="deeprag.table1.stage2-above-stage1"),
             f"- (iii) together (fewer retrievals, EM not worse): **{both}**."]
    for key, name in (("deeprag_imi", "stage I"), ("deeprag", "stage II")):
        lines.append(f"  {name} question MCC (did not retrieve vs needed nothing): {question_mcc(rows[key] or [])}")
    return lines


def combined(fewer: str, better: str) -> str:
    """Fewer retrievals at equal or better EM: holds when fewer holds and EM is not shown worse;
    does not hold when either is shown to go the other way; undetermined otherwise."""
    if fewer == "does not hold" or better == "does not hold":
        return "does not hold"
    return "holds" if fewer == "holds" else "undetermined"


def question_mcc(records: Records) -> str:
    rows = [r for r in records if r.get("needs_retrieval") is not None]
    predicted = [int(r["retrievals"]) == 0 for r in rows]
    truth = [r["needs_retrieval"] is False for r in rows]
    return _mcc_text(predicted, truth)


def _mcc_text(predicted: Sequence[bool], truth: Sequence[bool]) -> str:
    value = mcc_of(np.asarray(predicted, bool), np.asarray(truth, bool)) if predicted else 0.0
    interval = mcc_interval(predicted, truth)
    spread = f", 95% bootstrap interval {interval[0]:.3f} to {interval[1]:.3f}" if interval else ""
    return f"{value:.3f} (n {len(predicted)}{spread})"


def hop_pairs(records: Records, keep: Callable[[Mapping[str, Any]], bool]) -> tuple[list[bool], list[bool]]:
    """(retrieved, unknown) for every sub-question decision matched to a probed hop, in order."""
    retrieved, unknown = [], []
    for r in records:
        if not keep(r):
            continue
        for hop, decision in zip(r.get("hops") or [], r.get("decisions") or []):
            if hop.get("known") is None:
                continue
            retrieved.append(bool(decision["retrieve"]))
            unknown.append(hop["known"] is False)
    return retrieved, unknown


def decisions_pick_unknown_hops(rows: Rows) -> list[str]:
    """(iv) DeepRAG's retrieve decisions go with unknown hops: Fisher's exact test on the per-hop
    table, MCC with a bootstrap interval; over all questions and over mixed chains."""
    lines = []
    for key, name in DEEPRAGS:
        records = rows.get(key)
        if records is None:
            continue
        for scope, keep in (("all questions", lambda r: True), ("mixed chains", known_and_unknown)):
            retrieved, unknown = hop_pairs(records, keep)
            if not retrieved:
                lines.append(f"- (iv) {name}'s decisions on {scope}: no sub-question matched to a probed hop.")
                continue
            c = confusion(retrieved, unknown)  # positive: retrieved / this hop unknown
            lines.append(line(f"(iv) {name} retrieves for unknown hops and answers known ones ({scope})",
                              f"hop MCC {_mcc_text(retrieved, unknown)}, table TP {c.tp} FP {c.fp} FN {c.fn} TN {c.tn}",
                              fisher_association(c.tp, c.fp, c.fn, c.tn)))
    return lines or ["- (iv) DeepRAG's decisions: no deeprag row was run."]


def needless_retrieval_hurts(rows: Rows) -> list[str]:
    """Closed book answers more of the all-known questions than single retrieval does."""
    direct, single = rows.get("direct"), rows.get("single")
    if direct is None or single is None:
        return ["- Needless retrieval hurts: closed book or single retrieval was not run."]
    pairs = paired(direct, single, lambda r: r.get("needs_retrieval") is False)
    if not pairs:
        return ["- Needless retrieval hurts: no all-known question."]
    tested, figures = em_comparison(pairs)
    return [line("Needless retrieval hurts: closed book beats single retrieval on questions the model knows",
                 figures, tested, ledger="deeprag.section1.needless-retrieval-hurts")]


def fewer_retrievals_when_right(rows: Rows) -> list[str]:
    """DeepRAG Table 2: questions answered right took fewer retrievals than those answered wrong."""
    lines = []
    for key, name in DEEPRAGS:
        records = rows.get(key)
        if not records:
            continue
        right = [float(r["retrievals"]) for r in records if is_right(r)]
        wrong = [float(r["retrievals"]) for r in records if not is_right(r)]
        if right and wrong:
            lines.append(line(f"DeepRAG Table 2: {name} retrieves less for the questions it gets right",
                              f"{sum(right) / len(right):.2f} vs {sum(wrong) / len(wrong):.2f} retrievals/question "
                              f"({len(right)} right, {len(wrong)} wrong)", lower_mean(right, wrong),
                              ledger="deeprag.table2.fewer-retrievals-when-right"))
    return lines


def subquestions_by_hops(rows: Rows) -> list[str]:
    """DeepRAG Figure 7 on the world: sub-questions written per question, by its hop count."""
    lines = []
    for key, name in DEEPRAGS:
        records = rows.get(key)
        if not records:
            continue
        cells = []
        for hops in sorted({hop_count(r) for r in records if hop_count(r)}):
            group = [len(r.get("decisions") or []) for r in records if hop_count(r) == hops]
            share = sum(1 for n in group if n >= 2) / len(group)
            cells.append(f"{hops} hop(s): {sum(group) / len(group):.2f} (two or more on {share:.0%}, n {len(group)})")
        lines.append(f"- DeepRAG Figure 7: {name} writes sub-questions per question, by hops: " + "; ".join(cells) + ".")
    return lines


def queries_name_unknown(rows: Rows) -> list[str]:
    """DRAGIN Table 6 on the world: DRAGIN's queries name an unknown hop's entity more often than the
    fixed schedules' (Fisher's exact test on the query counts)."""
    lines = []
    for key, name in DRAGINS:
        mine = _query_flags(rows.get(key))
        for other, other_name in (("fixed_sentence", "FS-RAG"), ("fixed_length", "FL-RAG")):
            theirs = _query_flags(rows.get(other))
            if not mine or not theirs:
                continue
            a, b = sum(mine), sum(theirs)
            tested = fisher_association(a, b, len(mine) - a, len(theirs) - b)
            lines.append(line(f"DRAGIN Table 6: {name}'s queries name the unknown entity more often than {other_name}'s",
                              f"{a / len(mine):.3f} of {len(mine)} vs {b / len(theirs):.3f} of {len(theirs)}", tested,
                              ledger="dragin.section3.qfs-targets-need"))
    return lines


def _query_flags(records: Records | None) -> list[bool]:
    return [names_unknown_entity(str(q), r.get("hops") or [])
            for r in records or () if r.get("needs_retrieval") is True for q in r.get("queries") or []]


CLAIMS = (retrieval_follows_knowledge, dragin_beats_single, stage_two_retrieves_less, decisions_pick_unknown_hops,
          needless_retrieval_hurts, fewer_retrievals_when_right, subquestions_by_hops, queries_name_unknown)


def claim_lines(rows: Rows) -> list[str]:
    """Every claim's lines, in order."""
    return [text for claim in CLAIMS for text in claim(rows)]
