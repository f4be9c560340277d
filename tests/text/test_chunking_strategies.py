"""Sliding window and small-to-big chunking, and the small-to-big retriever over real BM25."""

import pytest

from dynrag.corpus import Passage
from dynrag.retrieval import BM25Index, Hit, Retriever
from dynrag.text.chunking import (
    SmallToBigRetriever,
    chunk_by_tokens,
    sliding_window,
    small_chunk_parent,
    small_to_big,
    small_to_big_corpus,
)


def words(n: int, prefix: str = "w") -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


def test_sliding_window_is_token_windows_with_overlap():
    p = Passage("d", "T", words(11))
    assert sliding_window(p, 4, 1) == chunk_by_tokens(p, 4, 1)
    assert [c.text for c in sliding_window(p, 5, 2)] == [
        "w0 w1 w2 w3 w4", "w3 w4 w5 w6 w7", "w6 w7 w8 w9 w10",
    ]


def test_small_to_big_ids_and_text():
    p = Passage("doc", "Title", words(10))
    groups = small_to_big(p, small_size=3, large_size=6, small_overlap=0, large_overlap=2)
    larges = [g[0] for g in groups]
    assert [(c.id, c.text) for c in larges] == [("doc#0", "w0 w1 w2 w3 w4 w5"), ("doc#1", "w4 w5 w6 w7 w8 w9")]
    smalls = groups[0][1]
    assert [(c.id, c.text, c.title) for c in smalls] == [
        ("doc#0/s0", "w0 w1 w2", "Title"),
        ("doc#0/s1", "w3 w4 w5", "Title"),
    ]
    assert [c.id for c in groups[1][1]] == ["doc#1/s0", "doc#1/s1"]
    # Every small chunk's text lies inside its large chunk.
    for large, chunk_smalls in groups:
        for s in chunk_smalls:
            assert s.text in large.text and small_chunk_parent(s.id) == large.id
    # A short passage: one large chunk with the passage's own id, still one suffixed small chunk.
    (large, chunk_smalls), = small_to_big(Passage("x/s1", "", "a b"), 3, 6)
    assert large.id == "x/s1" and [s.id for s in chunk_smalls] == ["x/s1/s0"]
    assert small_chunk_parent("x/s1/s0") == "x/s1"  # ids containing the separator still invert
    (large, chunk_smalls), = small_to_big(Passage("e", "", ""), 3, 6)
    assert [s.text for s in chunk_smalls] == [""]
    with pytest.raises(ValueError):
        small_to_big(p, 7, 6)
    with pytest.raises(ValueError):
        small_chunk_parent("doc#0")


def test_small_to_big_corpus():
    smalls, larges = small_to_big_corpus([Passage("a", "", words(5)), Passage("b", "", "tiny")], 2, 4)
    assert list(larges) == ["a#0", "a#1", "b"]
    assert [s.id for s in smalls] == ["a#0/s0", "a#0/s1", "a#1/s0", "b/s0"]


def test_small_to_big_retriever_over_real_bm25(tmp_path):
    # Two long documents; each fact sits in one small window of a large chunk.
    filler = words(40, "pad")
    docs = [
        Passage("river", "Rivers", f"{filler} the Rhone flows through Lyon {words(40, 'zz')}"),
        Passage("bridge", "Bridges", f"{words(30, 'qq')} the Velmora bridge spans the Rhone {filler}"),
    ]
    smalls, larges = small_to_big_corpus(docs, small_size=10, large_size=50, small_overlap=2)
    BM25Index.build(smalls, tmp_path / "small", progress=False)
    with BM25Index.load(tmp_path / "small", backend="numpy") as small_index:
        s2b = SmallToBigRetriever(small_index, larges, fanout=1)
        assert isinstance(s2b, Retriever)
        hits = s2b.search("Where does the Rhone flow through Lyon?", k=2)
        top = hits[0]
        assert top.id in larges and "Rhone flows through Lyon" in top.text
        assert top.text == larges[top.id].text and top.title == "Rivers"
        # Its score is that of its best small chunk.
        best_small = small_index.search("Where does the Rhone flow through Lyon?", k=1)[0]
        assert small_chunk_parent(best_small.id) == top.id and top.score == pytest.approx(best_small.score)
        # Distinct parents, even though several small chunks of one parent match "Rhone".
        assert len({h.id for h in hits}) == len(hits) == 2
        assert "Velmora" in s2b.search("Velmora bridge", k=1)[0].text


class FakeSmall:
    """Returns many small chunks of one parent before any other parent appears."""

    def __init__(self):
        self.asked: list[int] = []
        self.hits = [Hit(f"A/s{i}", "", "", 10.0 - i) for i in range(8)] + [Hit("B/s0", "", "", 1.0)]

    def search_batch(self, queries, k):
        self.asked.append(k)
        return [self.hits[:k] for _ in queries]


def test_small_to_big_widens_the_search_until_k_parents():
    small = FakeSmall()
    parents = {"A": Passage("A", "TA", "big A"), "B": Passage("B", "TB", "big B")}
    s2b = SmallToBigRetriever(small, parents.get, fanout=2, max_fanout=64)
    hits = s2b.search("q", 2)
    assert [(x.id, x.text, x.score) for x in hits] == [("A", "big A", 10.0), ("B", "big B", 1.0)]
    assert small.asked == [4, 16]  # 4 hits gave one parent; 16 reached both
    small.asked.clear()
    assert [x.id for x in s2b.search("q", 5)] == ["A", "B"]  # corpus exhausted: fewer than k
    assert small.asked == [10]
