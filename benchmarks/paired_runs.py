"""How far apart are two `dynrag eval` runs of the same questions, beyond noise?

For each run against a reference run (default: the directory named `baseline`), on the questions
both answered: the mean difference of per-question F1 and EM, a 95% paired bootstrap interval of
the F1 difference (10,000 resamples, seed 0), how many questions got better / worse, and the exact
McNemar test on EM (a two-sided binomial test on the questions whose EM differs, scipy). With 100
questions one question moves EM by 1 point, so a gap of 2-3 points is usually inside the interval.

    .venv/bin/python benchmarks/paired_runs.py runs/chain100/* --reference baseline
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from dynrag.io.rundir import read_predictions


def paired_bootstrap(diff: np.ndarray, resamples: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """95% interval of the mean of ``diff`` by resampling questions with replacement."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(diff), size=(resamples, len(diff)))
    means = diff[idx].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def mcnemar_exact(better: int, worse: int) -> float:
    """Two-sided p of the exact McNemar test: the discordant pairs against a fair coin."""
    from scipy.stats import binomtest

    return 1.0 if better + worse == 0 else float(binomtest(better, better + worse, 0.5).pvalue)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--reference", default="baseline", help="run directory name to compare with")
    args = ap.parse_args()
    runs = {d.name: {r["id"]: r for r in read_predictions(d)} for d in args.runs if (d / "config.json").is_file()}
    if args.reference not in runs:
        raise SystemExit(f"--reference {args.reference}: not among the runs ({', '.join(runs)})")
    ref = runs[args.reference]
    print(f"| run | n | F1 | F1 - {args.reference} | 95% interval | EM - {args.reference} | better / worse (F1) "
          "| better / worse (EM) | McNemar p (EM) |")
    print("| --- | ---: | ---: | ---: | --- | ---: | --- | --- | ---: |")
    for name, preds in runs.items():
        ids = [i for i in preds if i in ref]
        f1 = np.array([preds[i]["f1"] for i in ids])
        diff = f1 - np.array([ref[i]["f1"] for i in ids])
        em_diff = np.array([preds[i]["em"] - ref[i]["em"] for i in ids])
        em, up, down = em_diff.mean(), int((em_diff > 0).sum()), int((em_diff < 0).sum())
        low, high = paired_bootstrap(diff) if name != args.reference else (0.0, 0.0)
        print(f"| {name} | {len(ids)} | {100 * f1.mean():.1f} | {100 * diff.mean():+.1f} | "
              f"[{100 * low:+.1f}, {100 * high:+.1f}] | {100 * em:+.1f} | {(diff > 0).sum()} / {(diff < 0).sum()} "
              f"| {up} / {down} | {mcnemar_exact(up, down):.3f} |")


if __name__ == "__main__":
    main()
