"""The world's claim lines from hand-made records: which questions each claim compares, and its verdict."""

from dynrag.datasets.world_decisions import known_and_unknown
from dynrag.reproduce.world_claims import (
    claim_lines,
    combined,
    decisions_pick_unknown_hops,
    hop_pairs,
    retrieval_follows_knowledge,
    subquestions_by_hops,
)


def record(qid, hops, retrievals=0, em=0.0, decisions=(), queries=()):
    known = [h for h in hops]
    return {"id": qid, "em": em, "retrievals": retrievals, "needs_retrieval": any(k is False for k in known),
            "hops": [{"entity": f"E{qid}{i}", "known": k} for i, k in enumerate(known)],
            "decisions": [{"subquery": "q", "retrieve": d} for d in decisions], "queries": list(queries)}


def test_knowledge_is_compared_within_one_hop_count():
    rows = [record(i, [True], retrievals=0) for i in range(3)] + [record(10 + i, [False], retrievals=1) for i in range(3)]
    # two-hop questions all need retrieval: no contrast at two hops, so no line for it
    rows += [record(20 + i, [True, False], retrievals=2) for i in range(4)]
    lines = retrieval_follows_knowledge({"flare": rows})
    assert len(lines) == 2 and "1-hop" in lines[0] and "(3 known, 3 to look up)" in lines[0]
    assert "p 0.100: **undetermined**" in lines[0]  # 2 of C(6, 3) = 20 splits as extreme
    assert "Contested" in lines[1]
    assert "no DRAGIN or FLARE row" in retrieval_follows_knowledge({"flare": None})[0]


def test_hops_pair_with_decisions_in_order_and_unprobed_hops_are_left_out():
    r = record(1, [False, True, None], decisions=[True, True, False])
    assert hop_pairs([r], lambda _: True) == ([True, True], [True, False])
    assert known_and_unknown(r) and not known_and_unknown(record(2, [False, False]))


def test_decisions_on_mixed_chains_are_reported_apart():
    rows = [record(i, [False, True], decisions=[True, False]) for i in range(5)]
    lines = decisions_pick_unknown_hops({"deeprag": rows})
    assert len(lines) == 2 and "(all questions)" in lines[0] and "(mixed chains)" in lines[1]
    assert "TP 5 FP 0 FN 0 TN 5" in lines[1] and "**holds**" in lines[1]  # Fisher p = 2 / C(10, 5)


def test_figure7_counts_subquestions_by_hops():
    rows = [record(1, [False], decisions=[True]), record(2, [False, True], decisions=[True, False]),
            record(3, [False, True], decisions=[True])]
    (text,) = subquestions_by_hops({"deeprag_untrained": rows})
    assert "1 hop(s): 1.00 (two or more on 0%, n 1); 2 hop(s): 1.50 (two or more on 50%, n 2)" in text


def test_fewer_retrievals_and_not_worse_combine():
    assert combined("holds", "undetermined") == "holds"
    assert combined("holds", "does not hold") == "does not hold"
    assert combined("undetermined", "holds") == "undetermined"


def test_rows_not_run_say_so():
    lines = claim_lines({})
    assert any("(ii)" in t and "not run" in t for t in lines) and any("(iii)" in t and "not run" in t for t in lines)
