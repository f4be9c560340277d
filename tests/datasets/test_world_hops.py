"""Per-hop decision scoring and the other world decision figures, against hand-computed values."""

from __future__ import annotations

import math

import pytest

from dynrag.datasets.boundary import mcc
from dynrag.datasets.world_decisions import retrieval_decisions
from dynrag.datasets.world_hops import entity_queries, hop_confusion, names_unknown_entity


def test_mcc_hand_computed():
    # (3*4 - 1*2) / sqrt((3+1)(3+2)(4+1)(4+2)) = 10 / sqrt(600)
    assert mcc(3, 1, 2, 4) == pytest.approx(10 / math.sqrt(600))
    assert mcc(3, 1, 2, 4) == pytest.approx(0.408248, abs=1e-6)
    assert mcc(2, 0, 0, 3) == 1.0 and mcc(0, 2, 3, 0) == -1.0
    # an empty row or column: the denominator is 0 and MCC is defined as 0
    assert mcc(0, 0, 0, 0) == 0.0 and mcc(2, 3, 0, 0) == 0.0 and mcc(0, 0, 4, 1) == 0.0


def hop(entity, known):
    return {"entity": entity, "known": known}


RECORDS = [
    # retrieved an unknown hop (TP) and a known one (FP)
    {"hops": [hop("A", False), hop("B", True)], "decisions": [{"retrieve": True}, {"retrieve": True}]},
    # answered an unknown hop from memory (FN); one extra decision, which retrieved
    {"hops": [hop("C", False)], "decisions": [{"retrieve": False}, {"retrieve": True}]},
    # TN, TP, and a third hop without a decision (not probed)
    {"hops": [hop("D", True), hop("E", False), hop("F", None)], "decisions": [{"retrieve": False}, {"retrieve": True}]},
    # a matched hop without ground truth; a hop of an unknown fact without a decision
    {"hops": [hop("G", None), hop("H", False)], "decisions": [{"retrieve": True}]},
]


def test_hop_confusion_hand_computed():
    c = hop_confusion(RECORDS)
    assert (c["tp"], c["fp"], c["fn"], c["tn"]) == (2, 1, 1, 1)
    assert (c["questions"], c["matched"], c["no_truth"]) == (4, 5, 1)
    assert (c["extra_decisions"], c["extra_retrievals"]) == (1, 1)
    assert (c["missing_decisions"], c["missing_unknown"]) == (2, 1)
    assert c["precision"] == round(2 / 3, 6) and c["recall"] == round(2 / 3, 6)
    assert c["mcc"] == round((2 * 1 - 1 * 1) / math.sqrt(3 * 3 * 2 * 2), 6)  # 1/6
    assert c["unknown_share"] == 0.6
    # nothing retrieved, no unknown hop: precision and recall are undefined (None), MCC 0
    none = hop_confusion([{"hops": [hop("A", True)], "decisions": [{"retrieve": False}]}])
    assert (none["precision"], none["recall"], none["mcc"]) == (None, None, 0.0)


def test_queries_naming_an_unknown_entity():
    hops = [hop("Zorlak Mills", False), hop("Ada Brin", True)]
    assert names_unknown_entity("who founded ZORLAK mills?", hops)
    assert not names_unknown_entity("Where was Ada Brin born?", hops)  # a known hop's entity
    records = [{"needs_retrieval": True, "hops": hops, "queries": ["Who founded Zorlak Mills", "Ada Brin born"]},
               {"needs_retrieval": False, "hops": [hop("Paris", True)], "queries": ["Paris"]}]  # not counted
    assert entity_queries(records) == {"queries": 2, "naming_unknown": 1, "share": 0.5}
    assert entity_queries(records[1:])["share"] is None


def test_retrieval_decisions_groups_and_retrievals_by_need():
    preds = [
        {"retrievals": 0, "needs_retrieval": False, "hops": [hop("P", True)], "queries": [], "decisions": []},
        {"retrievals": 2, "needs_retrieval": False, "hops": [hop("Q", True), hop("R", True)], "queries": ["x", "y"],
         "decisions": []},
        {"retrievals": 1, "needs_retrieval": True, "hops": [hop("S", False)], "queries": ["S?"], "decisions": []},
        {"retrievals": 3, "needs_retrieval": True, "hops": [hop("T", True), hop("U", False)],
         "queries": ["T", "U", "u again"], "decisions": []},
    ]
    scores = [(1.0, 1.0), (0.0, 0.5), (1.0, 1.0), (0.0, 0.0)]
    rd = retrieval_decisions(preds, scores)
    assert (rd["tp"], rd["fp"], rd["fn"], rd["tn"]) == (1, 0, 1, 2)  # existing keys stay
    assert (rd["retrievals_all_known"], rd["retrievals_needs_retrieval"]) == (1.0, 2.0)
    assert rd["entity_queries"] == {"queries": 4, "naming_unknown": 3, "share": 0.75}
    g = rd["groups"]
    assert list(g) == ["hops_1", "hops_2", "multi_hop", "all_known", "needs_retrieval", "known_and_unknown"]
    assert g["known_and_unknown"] == {"n": 1, "em": 0.0, "f1": 0.0, "retrievals_per_question": 3.0}  # T known, U not
    assert g["hops_1"] == {"n": 2, "em": 1.0, "f1": 1.0, "retrievals_per_question": 0.5}
    assert g["multi_hop"] == {"n": 2, "em": 0.0, "f1": 0.25, "retrievals_per_question": 2.5}
    assert g["all_known"]["em"] == 0.5 and g["needs_retrieval"]["retrievals_per_question"] == 2.0
    assert "per_hop" not in rd  # no method decisions recorded
    preds[2]["decisions"] = [{"subquery": "S?", "retrieve": True}]
    assert retrieval_decisions(preds, scores)["per_hop"]["tp"] == 1


def test_summary_md_has_the_world_decision_lines():
    from dynrag.datasets.formats import dataset_spec
    from dynrag.eval.summary import summarize, summary_markdown

    base = {"answers": ["a"], "final_answer": "a", "prediction": "a", "generated_tokens": 1, "seconds": 1.0}
    preds = [{**base, "retrievals": 0, "needs_retrieval": False, "hops": [hop("P", True)], "queries": [],
              "decisions": [{"subquery": "P?", "retrieve": False}]},
             {**base, "retrievals": 1, "needs_retrieval": True, "hops": [hop("S", False)], "queries": ["s?"],
              "decisions": [{"subquery": "S?", "retrieve": True}]}]
    text = summary_markdown(summarize(preds, dataset_has_support=False, yes_no=False, dataset=dataset_spec("world")))
    assert "## Retrieval decisions (2 questions with ground truth, 1 need retrieval)" in text
    assert "Retrievals per question: 0.00 on all-known questions, 1.00 on those that need retrieval." in text
    assert "Queries naming an unknown hop's entity: 1 of 1 (100.0 %)." in text
    assert "Per hop (retrieved against unknown, 2 matched): TP 1, FP 0, FN 0, TN 1; precision 100.0 %" in text
