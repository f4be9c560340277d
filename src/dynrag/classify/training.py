"""Training and scoring the query classifier: read the labelled examples, split them (stratified,
seeded), choose the L2 penalty by stratified k-fold cross-validation, fit on the train part, and
score decisions against labels. scripts/train_query_classifier.py writes the shipped weights with
these; `dynrag reproduce bestpractice-table1` refits and scores with the same ones.

Everything but ``read_examples`` works on arrays: ``x`` (n, d) embeddings, ``y`` (n,) 0/1 labels
with 1 = needs retrieval.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dynrag.classify.logistic import fit, predict_proba
from dynrag.datasets.boundary import Confusion, confusion
from dynrag.errors import DataError, json_error

L2_GRID = (1e-4, 1e-3, 1e-2, 1e-1)
FOLDS = 5
SEED = 0  # of the held-out split and of the folds
TEST_FRACTION = 0.25
EXAMPLES_FILE = "query_classifier_examples.jsonl"  # packaged beside the weights


def default_examples_path() -> Path:
    from dynrag.data import data_path

    return data_path(EXAMPLES_FILE)


def read_examples(path: Path) -> tuple[list[str], np.ndarray, list[str]]:
    """(texts, labels (1 = needs retrieval), task names) of a JSONL of
    ``{"text", "needs_retrieval", "task"}`` records; both labels must occur."""
    texts, labels, tasks = [], [], []
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise json_error(path, exc, line_no) from exc
            text, label = record.get("text"), record.get("needs_retrieval")
            if not isinstance(text, str) or not text.strip():
                raise DataError(str(path), "'text' must be a non-empty string", line_no)
            if not isinstance(label, bool):
                raise DataError(str(path), "'needs_retrieval' must be true or false", line_no)
            texts.append(text.strip())
            labels.append(int(label))
            tasks.append(str(record.get("task", "")))
    if len(set(labels)) < 2:
        raise DataError(str(path), "needs examples of both labels")
    return texts, np.asarray(labels), tasks


def stratified_split(labels: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train indices, test indices): each label split in the same proportion, fixed seed."""
    rng = np.random.default_rng(seed)
    train, test = [], []
    for label in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == label))
        n_test = int(round(test_fraction * len(idx)))
        test.extend(idx[:n_test])
        train.extend(idx[n_test:])
    return np.sort(train), np.sort(test)


def stratified_folds(labels: np.ndarray, k: int, seed: int) -> list[np.ndarray]:
    """k index arrays covering every index once, each label dealt round-robin after a seeded shuffle."""
    rng = np.random.default_rng(seed)
    folds: list[list[int]] = [[] for _ in range(k)]
    for label in np.unique(labels):
        for j, i in enumerate(rng.permutation(np.flatnonzero(labels == label))):
            folds[j % k].append(int(i))
    return [np.sort(np.asarray(f)) for f in folds]


def decisions(x: np.ndarray, w: np.ndarray, b: float, threshold: float = 0.5) -> np.ndarray:
    """True where p(needs retrieval) >= threshold."""
    return predict_proba(x, w, b) >= threshold


def accuracy(x: np.ndarray, y: np.ndarray, w: np.ndarray, b: float) -> float:
    return float(np.mean(decisions(x, w, b) == (y == 1)))


def cross_validate(x: np.ndarray, y: np.ndarray, l2: float, seed: int, k: int = FOLDS) -> float:
    """Mean accuracy over stratified k folds, each scored by a model fitted on the other k - 1."""
    scores = []
    for f in stratified_folds(y, k, seed):
        mask = np.ones(len(y), dtype=bool)
        mask[f] = False
        w, b = fit(x[mask], y[mask], l2=l2)
        scores.append(accuracy(x[f], y[f], w, b))
    return float(np.mean(scores))


def choose_l2(x: np.ndarray, y: np.ndarray, seed: int, grid: tuple[float, ...] = L2_GRID) -> tuple[float, dict[float, float]]:
    """(the L2 with the best cross-validated accuracy, ties to the stronger penalty; every L2's accuracy)."""
    cv = {l2: cross_validate(x, y, l2, seed) for l2 in grid}
    return max(grid, key=lambda l2: (cv[l2], l2)), cv


@dataclass(frozen=True)
class HeldOutFit:
    """A model fitted on the train part of a stratified split, the penalty chosen on that part only."""

    train: np.ndarray  # indices
    test: np.ndarray  # indices
    cv: dict[float, float]  # L2 -> cross-validated accuracy on the train part
    l2: float
    w: np.ndarray
    b: float


def holdout_fit(x: np.ndarray, y: np.ndarray, *, test_fraction: float, seed: int,
                grid: tuple[float, ...] = L2_GRID) -> HeldOutFit:
    """Split, choose L2 by cross-validation on the train part, fit on the train part."""
    train, test = stratified_split(y, test_fraction, seed)
    l2, cv = choose_l2(x[train], y[train], seed, grid)
    w, b = fit(x[train], y[train], l2=l2)
    return HeldOutFit(train, test, cv, l2, w, b)


def flipped(c: Confusion) -> Confusion:
    """The same table with the other class called positive."""
    return Confusion(tp=c.tn, fp=c.fn, fn=c.fp, tn=c.tp)


def binary_scores(c: Confusion) -> dict[str, float | int]:
    """Accuracy, precision, recall and F1 of the positive class, with the counts. An empty
    denominator gives 0, as scikit-learn does (and as datasets/boundary.py does for F1)."""

    def ratio(num: int, den: int) -> float:
        return num / den if den else 0.0

    return {"n": c.n, "tp": c.tp, "fp": c.fp, "fn": c.fn, "tn": c.tn,
            "accuracy": ratio(c.tp + c.tn, c.n), "precision": ratio(c.tp, c.tp + c.fp),
            "recall": ratio(c.tp, c.tp + c.fn), "f1": ratio(2 * c.tp, 2 * c.tp + c.fp + c.fn)}


def score_decisions(predicted: np.ndarray, truth: np.ndarray) -> Confusion:
    """The 2x2 counts of predicted positives against true ones (both boolean or 0/1 arrays)."""
    return confusion((bool(p) for p in predicted), (bool(t) for t in truth))
