import pytest

from dynrag.rerank.base import passage_text, ranked
from dynrag.retrieval.base import Hit


def hits(n):
    return [Hit(f"p{i}", f"t{i}", f"text {i}", float(10 - i)) for i in range(n)]


def test_ranked_sorts_by_the_new_scores_and_keeps_top_k():
    out = ranked(hits(4), [0.1, 0.9, 0.5, 0.7], top_k=3)
    assert [h.id for h in out] == ["p1", "p3", "p2"]
    assert [h.score for h in out] == [0.9, 0.7, 0.5]
    assert out[0].text == "text 1" and out[0].title == "t1"


def test_ties_keep_the_retrievers_order():
    assert [h.id for h in ranked(hits(4), [0.5, 0.5, 0.9, 0.5], top_k=4)] == ["p2", "p0", "p1", "p3"]


def test_top_k_larger_than_the_list_and_empty_lists():
    assert len(ranked(hits(2), [1, 2], top_k=10)) == 2
    assert ranked([], [], top_k=3) == []


def test_mismatched_scores_are_an_error():
    with pytest.raises(ValueError, match="2 hits but 1 scores"):
        ranked(hits(2), [1.0], top_k=2)


def test_passage_text_has_the_title_and_collapsed_whitespace():
    assert passage_text(Hit("a", "Lyon", "a  city\non the\tRhone", 0)) == "Lyon: a city on the Rhone"
    assert passage_text(Hit("a", "", "just text", 0)) == "just text"
