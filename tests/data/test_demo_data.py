"""The packaged demo questions are answerable from the packaged demo passages."""

import json

from dynrag.data import demo_passages_path, load_demo_questions
from dynrag.demo import ordered_demo_questions
from dynrag.datasets.metrics import normalize_answer


def passages_by_id():
    with open(demo_passages_path(), encoding="utf-8") as f:
        return {row["id"]: row for row in map(json.loads, f)}


def test_every_supporting_passage_exists_and_single_hop_answers_are_in_theirs():
    passages = passages_by_id()
    questions = load_demo_questions()
    assert len({q.id for q in questions}) == len(questions)
    for q in questions:
        assert q.supporting and all(s in passages for s in q.supporting), q.id
        if q.hops == "single-hop":
            assert len(q.supporting) == 1, q.id
            text = normalize_answer(passages[q.supporting[0]]["text"])
            assert normalize_answer(q.answers[0]) in text, q.id
        else:
            assert len(q.supporting) >= 2, q.id


def test_demo_counts_and_order():
    questions = ordered_demo_questions()
    hops = [q.hops for q in questions]
    assert hops.count("multi-hop") >= 10 and hops.count("single-hop") >= 10
    # single-hop first, then multi-hop, each in file order
    assert hops == sorted(hops, key=lambda h: h != "single-hop")
    assert [q.id for q in questions if q.hops == "single-hop"][0] == "s01"
