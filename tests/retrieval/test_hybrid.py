import numpy as np
import pytest

from dynrag.errors import ConfigError
from dynrag.retrieval import BM25Index, Hit, Retriever
from dynrag.retrieval.dense import DenseIndex
from dynrag.retrieval.hybrid import HybridRetriever, fuse, hybrid_scores, minmax, rrf
from tests.fakes import FakeRetriever
from tests.retrieval.conftest import CORPUS


def test_minmax_by_hand():
    np.testing.assert_allclose(minmax([2.0, 4.0, 3.0, 6.0]), [0.0, 0.5, 0.25, 1.0])
    np.testing.assert_allclose(minmax([-1.0, 1.0]), [0.0, 1.0])
    np.testing.assert_allclose(minmax([5.0, 5.0]), [1.0, 1.0])  # constant: all as good as the best
    np.testing.assert_allclose(minmax([0.7]), [1.0])
    assert minmax([]).shape == (0,)


def test_hybrid_scores_by_hand():
    sparse = {"a": 10.0, "b": 6.0, "c": 2.0}  # normalised: a 1, b 0.5, c 0
    dense = {"b": 0.9, "d": 0.5, "a": 0.7}  # normalised: b 1, d 0, a 0.5
    got = hybrid_scores(sparse, dense, alpha=0.3)
    assert list(got) == ["a", "b", "c", "d"]  # sparse order, then dense-only ids
    assert got == pytest.approx({"a": 0.3 * 1 + 0.5, "b": 0.3 * 0.5 + 1.0, "c": 0.0, "d": 0.0})
    got = hybrid_scores(sparse, dense, alpha=0.9)
    assert got == pytest.approx({"a": 0.9 + 0.5, "b": 0.45 + 1.0, "c": 0.0, "d": 0.0})
    # a missing side counts 0; an empty side contributes nothing
    assert hybrid_scores({}, {"x": 0.2, "y": 0.4}, 0.3) == pytest.approx({"x": 0.0, "y": 1.0})
    assert hybrid_scores({"x": 3.0}, {}, 0.5) == pytest.approx({"x": 0.5})


def test_rrf_by_hand():
    got = rrf([["a", "b", "c"], ["b", "d"]], k=60)
    assert got == pytest.approx({
        "a": 1 / 61,
        "b": 1 / 62 + 1 / 61,
        "c": 1 / 63,
        "d": 1 / 62,
    })
    assert rrf([["a", "a", "b"]], k=0) == pytest.approx({"a": 1.0, "b": 1 / 3})  # repeats count once
    assert rrf([]) == {}
    with pytest.raises(ValueError):
        rrf([["a"]], k=-1)


def h(pid: str, score: float) -> Hit:
    return Hit(pid, pid.upper(), f"text of {pid}", score)


def test_fuse_orders_and_keeps_passages():
    sparse = [h("a", 10.0), h("b", 6.0), h("c", 2.0)]
    dense = [h("b", 0.9), h("a", 0.7), h("d", 0.5)]
    fused = fuse(sparse, dense, 3, alpha=0.3)
    assert [x.id for x in fused] == ["b", "a", "c"]  # 1.15, 0.8, then c/d tie at 0: sparse first
    assert fused[0] == Hit("b", "B", "text of b", pytest.approx(1.15))
    fused = fuse(sparse, dense, 4, alpha=3.0)  # a heavy sparse weight flips a and b
    assert [x.id for x in fused] == ["a", "b", "c", "d"]
    fused = fuse(sparse, dense, 3, fusion="rrf")
    # a: ranks 1 and 2, b: ranks 2 and 1 -> a tie, broken by sparse order; c: rank 3 only
    assert [x.id for x in fused] == ["a", "b", "c"]
    assert [x.score for x in fused] == pytest.approx([1 / 61 + 1 / 62, 1 / 61 + 1 / 62, 1 / 63])
    with pytest.raises(ConfigError):
        fuse(sparse, dense, 2, fusion="max")  # type: ignore[arg-type]


def test_hybrid_retriever_asks_for_candidates():
    bm25 = FakeRetriever([h("a", 10.0), h("b", 6.0), h("c", 2.0)])
    dense = FakeRetriever([h("b", 0.9), h("a", 0.7), h("d", 0.5)])
    hyb = HybridRetriever(bm25, dense, candidates=3)
    assert isinstance(hyb, Retriever)
    assert [x.id for x in hyb.search("q", 2)] == ["b", "a"]
    assert bm25.asked == [3] and dense.asked == [3]
    hyb.search_batch(["q", "r"], 5)  # k above candidates: asks for k
    assert bm25.asked[-1] == 5
    assert hyb.search_batch([], 3) == []
    for bad in ({"fusion": "sum"}, {"alpha": -1}, {"candidates": 0}):
        with pytest.raises(ConfigError):
            HybridRetriever(bm25, dense, **bad)


def test_hybrid_over_real_bm25_and_real_embedder(tmp_path, embedder):
    out = tmp_path / "idx"
    BM25Index.build(CORPUS, out, progress=False)
    DenseIndex.build_alongside(out, embedder, progress=False)
    hyb = HybridRetriever(BM25Index.load(out, backend="numpy"), DenseIndex.load(out, embedder))
    # BM25 finds nothing for a paraphrase without shared terms; dense carries it.
    assert hyb.bm25.search("percussionist of a group", k=3) == []
    assert hyb.search("percussionist of a group", k=1)[0].id == "peart"
    # Both agree on a keyword query.
    assert hyb.search("capital of Germany", k=1)[0].id == "berlin"
    rrf_hyb = HybridRetriever(hyb.bm25, hyb.dense, fusion="rrf")
    assert rrf_hyb.search("capital of Germany", k=1)[0].id == "berlin"
    hyb.close()
