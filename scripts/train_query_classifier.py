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
import sys
from pathlib import Path

import numpy as np

from dynrag.classify.logistic import fit
from dynrag.classify.query import FORMAT_VERSION, default_weights_path
from dynrag.classify.training import (
    L2_GRID, SEED, TEST_FRACTION, accuracy, decisions, default_examples_path, holdout_fit, read_examples,
)
from dynrag.errors import DynragError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=Path, default=default_examples_path())
    parser.add_argument("--out", type=Path, default=default_weights_path())
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--test-fraction", type=float, default=TEST_FRACTION)
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

    held = holdout_fit(x, y, test_fraction=args.test_fraction, seed=args.seed)
    train, test, best_l2 = held.train, held.test, held.l2
    for l2 in L2_GRID:
        print(f"  l2={l2:g}: 5-fold CV accuracy on train {held.cv[l2]:.4f}{'  <- chosen' if l2 == best_l2 else ''}")
    held_out = accuracy(x[test], y[test], held.w, held.b)
    pred = decisions(x[test], held.w, held.b)
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
