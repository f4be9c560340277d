import numpy as np
import pytest

from dynrag.rerank.embedding import EmbeddingReranker, cosine_scores
from dynrag.retrieval.base import Hit
from dynrag.retrieval.embedder import Embedder


@pytest.fixture(scope="module")
def embedder():
    return Embedder.load()


def test_cosine_scores_by_hand():
    got = cosine_scores(np.array([1.0, 0.0]), np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0], [0.0, 0.0]]))
    np.testing.assert_allclose(got, [1.0, 0.0, 1 / np.sqrt(2), 0.0])


def test_reranks_by_cosine_with_the_real_embedder(embedder):
    hits = [
        Hit("cake", "Sponge cake", "Beat the eggs with sugar, fold in the flour and bake for thirty minutes.", 9.0),
        Hit("tower", "Eiffel Tower", "The wrought-iron tower on the Champ de Mars in Paris was finished in 1889.", 1.0),
        Hit("river", "Seine", "The Seine flows through Paris before reaching the English Channel at Le Havre.", 5.0),
    ]
    question = "When was the Eiffel Tower completed?"
    out = EmbeddingReranker(embedder).rerank(question, hits, top_k=3)
    assert out[0].id == "tower" and out[-1].id == "cake"
    vectors = embedder.encode([question] + [f"{h.title}: {h.text}" for h in hits])
    expected = {h.id: float(vectors[i + 1] @ vectors[0]) for i, h in enumerate(hits)}
    for h in out:
        assert h.score == pytest.approx(expected[h.id], abs=1e-5)


def test_no_hits(embedder):
    assert EmbeddingReranker(embedder).rerank("anything", [], 3) == []
