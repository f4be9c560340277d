"""Training and scoring the query classifier (classify/training.py): the split, the folds, the L2
choice, the held-out fit and the metric formulas; the training script uses these, not copies."""

import importlib.util
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from dynrag.classify import training
from dynrag.classify.logistic import fit
from dynrag.classify.training import (
    L2_GRID, binary_scores, choose_l2, flipped, holdout_fit, read_examples, score_decisions, stratified_folds,
    stratified_split,
)
from dynrag.datasets.boundary import Confusion
from dynrag.errors import DataError

ROOT = Path(__file__).resolve().parents[2]


def test_stratified_split_is_deterministic_and_proportional():
    labels = np.array([0] * 40 + [1] * 20)
    train, test = stratified_split(labels, 0.25, seed=0)
    assert sorted(np.concatenate([train, test]).tolist()) == list(range(60))
    assert Counter(labels[test].tolist()) == {0: 10, 1: 5} and len(train) == 45
    again = stratified_split(labels, 0.25, seed=0)
    assert (again[0] == train).all() and (again[1] == test).all()
    assert not (stratified_split(labels, 0.25, seed=1)[1] == test).all()


def test_the_shipped_examples_split_248_to_84():
    _, y, _ = read_examples(training.default_examples_path())
    train, test = stratified_split(y, training.TEST_FRACTION, training.SEED)
    assert (len(train), len(test)) == (248, 84)
    assert Counter(y[test].tolist()) == {0: 42, 1: 42}


def test_folds_cover_every_index_once_and_keep_the_proportions():
    labels = np.array([0] * 40 + [1] * 20 + [0] * 3)  # 43 zeros: folds of unequal size
    folds = stratified_folds(labels, 5, seed=0)
    together = np.concatenate(folds)
    assert sorted(together.tolist()) == list(range(len(labels)))
    assert all(Counter(labels[f].tolist())[1] == 4 for f in folds)
    assert sorted(Counter(labels[f].tolist())[0] for f in folds) == [8, 8, 9, 9, 9]
    assert all((a == b).all() for a, b in zip(folds, stratified_folds(labels, 5, seed=0)))


def test_training_data_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "ex.jsonl"
    bad.write_text('{"text": "a", "needs_retrieval": true}\n{"text": "b", "needs_retrieval": "yes"}\n')
    with pytest.raises(DataError, match=r"ex.jsonl:2: 'needs_retrieval' must be true or false"):
        read_examples(bad)
    bad.write_text('{"text": "a", "needs_retrieval": true}\n')
    with pytest.raises(DataError, match="both labels"):
        read_examples(bad)
    bad.write_text('{"text": " a ", "needs_retrieval": true, "task": "fact"}\n\n{"text": "b", "needs_retrieval": false}\n')
    texts, labels, tasks = read_examples(bad)
    assert texts == ["a", "b"] and labels.tolist() == [1, 0] and tasks == ["fact", ""]


def separable(n: int = 40, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.array([0, 1] * (n // 2))
    x = rng.normal(size=(n, 3)) * 0.1 + np.where(y[:, None] == 1, 1.0, -1.0)
    return x, y


def test_l2_ties_go_to_the_stronger_penalty_and_the_holdout_fit_sees_only_its_train_part():
    x, y = separable()
    l2, cv = choose_l2(x, y, seed=0)
    assert set(cv) == set(L2_GRID) and all(v == 1.0 for v in cv.values())  # every penalty separates them
    assert l2 == max(L2_GRID)
    held = holdout_fit(x, y, test_fraction=0.25, seed=0)
    assert len(held.test) == 10 and not set(held.train) & set(held.test) and held.l2 == l2
    w, b = fit(x[held.train], y[held.train], l2=held.l2)
    np.testing.assert_allclose(held.w, w)
    assert held.b == pytest.approx(b)


def test_metrics_from_hand_counted_decisions():
    predicted = np.array([1, 1, 1, 0, 0, 1, 0, 0, 1, 1], dtype=bool)
    truth = np.array([1, 1, 0, 1, 0, 1, 0, 0, 1, 0], dtype=bool)
    c = score_decisions(predicted, truth)
    assert c == Confusion(tp=4, fp=2, fn=1, tn=3)
    s = binary_scores(c)
    assert s["n"] == 10 and s["accuracy"] == pytest.approx(7 / 10)
    assert s["precision"] == pytest.approx(4 / 6) and s["recall"] == pytest.approx(4 / 5)
    assert s["f1"] == pytest.approx(2 * (4 / 6) * (4 / 5) / (4 / 6 + 4 / 5))
    other = binary_scores(flipped(c))  # the other class positive: TP 3, FP 1, FN 2
    assert (other["tp"], other["fp"], other["fn"], other["tn"]) == (3, 1, 2, 4)
    assert other["precision"] == pytest.approx(3 / 4) and other["recall"] == pytest.approx(3 / 5)
    assert other["accuracy"] == s["accuracy"]


def test_empty_denominators_give_zero():
    s = binary_scores(score_decisions(np.zeros(3, dtype=bool), np.zeros(3, dtype=bool)))
    assert (s["accuracy"], s["precision"], s["recall"], s["f1"]) == (1.0, 0.0, 0.0, 0.0)
    assert binary_scores(Confusion(0, 0, 0, 0))["accuracy"] == 0.0


def test_the_training_script_uses_these_functions():
    spec = importlib.util.spec_from_file_location("train_query_classifier", ROOT / "scripts/train_query_classifier.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.holdout_fit is holdout_fit and script.read_examples is read_examples
    assert not hasattr(script, "stratified_split") and not hasattr(script, "cross_validate")
