"""The shipped query classifier and its examples file (training: test_training.py)."""

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from dynrag.classify import QueryClassifier
from dynrag.classify.query import FORMAT_VERSION, default_weights_path
from dynrag.errors import DynragError
from dynrag.retrieval.embedder import Embedder

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "src/dynrag/data/query_classifier_examples.jsonl"


@pytest.fixture(scope="module")
def classifier():
    return QueryClassifier.load(embedder=Embedder.load())


def test_weights_are_plain_arrays_with_metadata():
    with np.load(default_weights_path(), allow_pickle=False) as data:
        assert data["W"].shape == (384,) and data["W"].dtype == np.float32
        assert data["b"].shape == (1,)
        assert int(data["version"]) == FORMAT_VERSION
        assert str(data["embedding_model"]) == "all-MiniLM-L6-v2"
        assert 0.9 <= float(data["heldout_accuracy"]) <= 1.0
        assert int(data["n_examples"]) >= 200


def test_examples_are_many_balanced_and_distinct():
    records = [json.loads(line) for line in EXAMPLES.read_text(encoding="utf-8").splitlines() if line.strip()]
    labels = Counter(r["needs_retrieval"] for r in records)
    assert len(records) >= 200 and abs(labels[True] - labels[False]) <= 0.1 * len(records)
    assert len({r["text"] for r in records}) == len(records)


@pytest.mark.parametrize(
    "text, needs",
    [
        ("Translate 'see you next week' into Norwegian.", False),
        ("What is 48 divided by 6?", False),
        ("Summarise this: the meeting ran late and nothing was decided.", False),
        ("Who was the first president of Kenya?", True),
        ("In which year was the Golden Gate Bridge opened?", True),
    ],
)
def test_clear_cases(classifier, text, needs):
    decision = classifier.decide(text)
    assert decision.needs_retrieval is needs
    assert decision.probability == pytest.approx(float(classifier.probabilities([text])[0]))


def test_the_threshold_decides(classifier):
    p = classifier.decide("Who was the first president of Kenya?").probability
    assert classifier.decide("Who was the first president of Kenya?", threshold=min(1.0, p + 1e-6)).needs_retrieval is False


def test_bad_weight_files_are_named(tmp_path):
    with pytest.raises(DynragError, match="nope.npz: no such"):
        QueryClassifier.load(tmp_path / "nope.npz")
    np.savez(tmp_path / "partial.npz", W=np.zeros(384, dtype=np.float32))
    with pytest.raises(DynragError, match="partial.npz: query-classifier file lacks b, embedding_model, version"):
        QueryClassifier.load(tmp_path / "partial.npz")
    (tmp_path / "junk.npz").write_text("not numpy")
    with pytest.raises(DynragError, match="junk.npz: not a query-classifier"):
        QueryClassifier.load(tmp_path / "junk.npz")


def test_a_different_embedding_model_is_refused():
    class OtherEmbedder:
        name = "some-other-model"
        dimension = 384

    classifier = QueryClassifier.load(embedder=OtherEmbedder())
    with pytest.raises(DynragError, match="trained on 'all-MiniLM-L6-v2'"):
        classifier.decide("anything")
