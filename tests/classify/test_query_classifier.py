"""The shipped query classifier, its examples file and its training script."""

import importlib.util
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from dynrag.classify import QueryClassifier
from dynrag.classify.query import FORMAT_VERSION, default_weights_path
from dynrag.errors import DataError, DynragError
from dynrag.retrieval.embedder import Embedder

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "src/dynrag/data/query_classifier_examples.jsonl"


def load_script():
    spec = importlib.util.spec_from_file_location("train_query_classifier", ROOT / "scripts/train_query_classifier.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def test_stratified_split_is_deterministic_and_proportional():
    script = load_script()
    labels = np.array([0] * 40 + [1] * 20)
    train, test = script.stratified_split(labels, 0.25, seed=0)
    assert sorted(np.concatenate([train, test]).tolist()) == list(range(60))
    assert Counter(labels[test].tolist()) == {0: 10, 1: 5}
    again = script.stratified_split(labels, 0.25, seed=0)
    assert (again[1] == test).all()
    folds = script.stratified_folds(labels, 5, seed=0)
    assert all(Counter(labels[f].tolist()) == {0: 8, 1: 4} for f in folds)


def test_training_data_errors_name_file_and_line(tmp_path):
    script = load_script()
    bad = tmp_path / "ex.jsonl"
    bad.write_text('{"text": "a", "needs_retrieval": true}\n{"text": "b", "needs_retrieval": "yes"}\n')
    with pytest.raises(DataError, match=r"ex.jsonl:2: 'needs_retrieval' must be true or false"):
        script.read_examples(bad)
    bad.write_text('{"text": "a", "needs_retrieval": true}\n')
    with pytest.raises(DataError, match="both labels"):
        script.read_examples(bad)
