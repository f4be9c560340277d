"""`dynrag compare --claims`: the seeds' pairwise claims among runs of the same questions.

DRAGIN's paper claims it answers better than each baseline of its Table 2, and FLARE's better
than single retrieval. Among the runs given to `compare`, every pair those claims name that
answered the same data file is decided on the questions both answered: exact McNemar on
right/wrong (EM), with n, p and the verdict of ``eval/significance.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dynrag.eval.significance import Tested, mcnemar
from dynrag.io.rundir import read_predictions, unique_by_id

# (claimed better method, claimed worse method); None: every other method among the runs.
CLAIMED_PAIRS: tuple[tuple[str, str | None], ...] = (("dragin", None), ("flare", "single"))


@dataclass(frozen=True)
class PairVerdict:
    dataset: str
    better: str  # the run's label
    worse: str
    better_em: float
    worse_em: float
    tested: Tested


def correct_by_id(run_dir: Path, metric: str = "em") -> dict[str, bool]:
    """Question id -> answered right (``metric`` of its record is 1)."""
    records = unique_by_id(read_predictions(Path(run_dir)))[0]
    return {str(r["id"]): bool(r.get(metric)) for r in records}


def claimed_pairs(runs: Sequence[dict[str, Any]]) -> list[tuple[int, int]]:
    """Index pairs (better, worse) of runs on the same dataset and data file that a claim names."""
    pairs = []
    for i, a in enumerate(runs):
        for j, b in enumerate(runs):
            if i == j or (a.get("dataset"), a.get("data_sha256")) != (b.get("dataset"), b.get("data_sha256")):
                continue
            for better, worse in CLAIMED_PAIRS:
                if a.get("method") == better and b.get("method") != better and worse in (None, b.get("method")):
                    pairs.append((i, j))
    return pairs


def decide_pairs(runs: Sequence[dict[str, Any]], labels: Sequence[str]) -> list[PairVerdict]:
    verdicts = []
    for i, j in claimed_pairs(runs):
        a, b = correct_by_id(runs[i]["run"]), correct_by_id(runs[j]["run"])
        shared = sorted(set(a) & set(b))
        if not shared:
            continue
        ra, rb = [a[q] for q in shared], [b[q] for q in shared]
        verdicts.append(PairVerdict(str(runs[i].get("dataset")), labels[i], labels[j], sum(ra) / len(shared),
                                    sum(rb) / len(shared), mcnemar(ra, rb)))
    return verdicts


def claim_lines(verdicts: Sequence[PairVerdict]) -> str:
    """One markdown line a claim: both EMs on the shared questions, the test, n, p and the verdict."""
    if not verdicts:
        return ""
    lines = ["", "Claims (each on the questions both runs answered; exact McNemar on EM):", ""]
    for v in verdicts:
        t = v.tested
        lines.append(f"- {v.dataset}: {v.better} above {v.worse}: EM {v.better_em:.3f} vs {v.worse_em:.3f}, "
                     f"{t.test}, n {t.n}, p {t.p:.3g}: **{t.verdict}**")
    return "\n".join(lines) + "\n"
