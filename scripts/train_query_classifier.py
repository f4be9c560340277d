#!/usr/bin/env python
"""Train the query classifier (does a request need retrieval?) and write its weights as .npz.

    python scripts/train_query_classifier.py \
        [--examples src/dynrag/data/query_classifier_examples.jsonl] \
        [--out src/dynrag/data/query_classifier.npz] [--seed 0] [--test-fraction 0.25]

1. Embed every example with the packaged all-MiniLM-L6-v2 (the same embedder used at run time).
2. Stratified split (per label, fixed seed) into train and held-out test.
3. Pick the L2 penalty by stratified 5-fold cross-validation on the train part.
4. Report held-out accuracy of the model fitted on the train part.
5. Refit on all examples with that penalty and write W, b and metadata (no pickle).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from dynrag.classify.logistic import fit, predict_proba
from dynrag.classify.query import FORMAT_VERSION, default_weights_path
from dynrag.errors import DataError, DynragError

L2_GRID = (1e-4, 1e-3, 1e-2, 1e-1)


def read_examples(path: Path) -> tuple[list[str], np.ndarray, list[str]]:
    texts, labels, tasks = [], [], []
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(str(path), f"invalid JSON: {exc.msg}", line_no) from exc
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
    rng = np.random.default_rng(seed)
    folds: list[list[int]] = [[] for _ in range(k)]
    for label in np.unique(labels):
        for j, i in enumerate(rng.permutation(np.flatnonzero(labels == label))):
            folds[j % k].append(int(i))
    return [np.sort(np.asarray(f)) for f in folds]


def accuracy(x: np.ndarray, y: np.ndarray, w: np.ndarray, b: float) -> float:
    return float(np.mean((predict_proba(x, w, b) >= 0.5) == (y == 1)))


def cross_validate(x: np.ndarray, y: np.ndarray, l2: float, seed: int, k: int = 5) -> float:
    folds = stratified_folds(y, k, seed)
    scores = []
    for f in folds:
        mask = np.ones(len(y), dtype=bool)
        mask[f] = False
        w, b = fit(x[mask], y[mask], l2=l2)
        scores.append(accuracy(x[f], y[f], w, b))
    return float(np.mean(scores))


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=Path, default=here / "src/dynrag/data/query_classifier_examples.jsonl")
    parser.add_argument("--out", type=Path, default=default_weights_path())
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--test-fraction", type=float, default=0.25)
    args = parser.parse_args(argv)

    from dynrag.retrieval.embedder import Embedder

    try:
        texts, y, tasks = read_examples(args.examples)
        embedder = Embedder.load()
    except DynragError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    x = embedder.encode(texts).astype(np.float64)
    print(f"{len(texts)} examples: {int(y.sum())} need retrieval, {int((1 - y).sum())} do not; "
          f"embeddings {embedder.name} ({x.shape[1]} dims)")

    train, test = stratified_split(y, args.test_fraction, args.seed)
    cv = {l2: cross_validate(x[train], y[train], l2, args.seed) for l2 in L2_GRID}
    best_l2 = max(L2_GRID, key=lambda l2: (cv[l2], l2))  # ties: the stronger penalty
    for l2 in L2_GRID:
        print(f"  l2={l2:g}: 5-fold CV accuracy on train {cv[l2]:.4f}{'  <- chosen' if l2 == best_l2 else ''}")
    w, b = fit(x[train], y[train], l2=best_l2)
    held_out = accuracy(x[test], y[test], w, b)
    pred = predict_proba(x[test], w, b) >= 0.5
    wrong = [(texts[i], bool(y[i])) for i, p in zip(test, pred) if p != (y[i] == 1)]
    per_class = {
        name: float(np.mean(pred[y[test] == label] == (label == 1)))
        for name, label in (("needs retrieval", 1), ("no retrieval", 0))
    }
    print(f"held-out accuracy: {held_out:.3f} on {len(test)} examples (train {len(train)}; seed {args.seed}); "
          + ", ".join(f"{k} {v:.3f}" for k, v in per_class.items()))
    for text, label in wrong:
        print(f"  wrong: [{'retrieve' if label else 'direct'}] {text}")

    w_all, b_all = fit(x, y, l2=best_l2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.stem + ".tmp.npz")
    np.savez(
        tmp,
        W=w_all.astype(np.float32),
        b=np.asarray([b_all], dtype=np.float32),
        version=np.asarray(FORMAT_VERSION),
        embedding_model=np.asarray(embedder.name),
        positive_label=np.asarray("needs_retrieval"),
        l2=np.asarray(best_l2),
        n_examples=np.asarray(len(texts)),
        heldout_accuracy=np.asarray(held_out),
        heldout_n=np.asarray(len(test)),
        seed=np.asarray(args.seed),
        train_accuracy_all=np.asarray(accuracy(x, y, w_all, b_all)),
    )
    tmp.replace(args.out)
    print(f"wrote {args.out} (fitted on all {len(texts)} examples, l2={best_l2:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
