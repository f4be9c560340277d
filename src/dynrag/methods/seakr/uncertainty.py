"""SeaKR's self-aware uncertainty and the decisions made with it, as pure functions on numbers.

For k sampled continuations, Z holds one hidden state per row (k x d). With the centring matrix
J_d = I_d - (1/d) 1 1^T, the Gram matrix is Sigma = Z J_d Z^T (k x k), and the uncertainty is

    U = (1/k) * log det(Sigma + alpha * I_k)

(the "EigenScore" of Chen et al.'s INSIDE, which SeaKR adopts). J_d is symmetric and idempotent,
so Z J_d Z^T = (Z J_d)(Z J_d)^T: each row minus its own mean over the d features, multiplied by
the transposed. Continuations that agree give nearly parallel rows, so Sigma is close to rank one
and U close to its floor ((k - 1)/k) log(alpha); continuations that disagree spread Sigma's
eigenvalues and raise U. SeaKR retrieves when U exceeds a threshold.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def eigen_score(states: np.ndarray, alpha: float = 1e-3) -> float:
    """U = (1/k) log det(Z J_d Z^T + alpha I) for the k x d matrix ``states`` (k >= 1, alpha > 0)."""
    z = np.asarray(states, dtype=np.float64)
    if z.ndim != 2 or z.shape[0] == 0:
        raise ValueError(f"expected a non-empty k x d matrix of hidden states, got shape {z.shape}")
    if alpha <= 0:
        raise ValueError("alpha must be above 0: it keeps the determinant of a rank-deficient Gram matrix positive")
    k = z.shape[0]
    centred = z - z.mean(axis=1, keepdims=True)  # Z J_d
    gram = centred @ centred.T
    sign, logdet = np.linalg.slogdet(gram + alpha * np.eye(k))
    # Sigma is positive semi-definite and alpha > 0, so the sign is +1 up to rounding.
    return float(logdet) / k


def sample_uncertainty(texts: Sequence[str], states: np.ndarray, alpha: float = 1e-3) -> float | None:
    """The eigen-score over the samples whose text is not blank (an empty continuation says
    nothing of what the model would write, so the authors leave it out); None when none is left."""
    keep = [i for i, text in enumerate(texts) if text.strip()]
    if not keep:
        return None
    return eigen_score(np.asarray(states)[keep], alpha)


def floor_score(k: int, alpha: float, spread: float = 0.0) -> float:
    """U when all k rows are one centred vector of squared norm ``spread``: Sigma's eigenvalues are
    k * spread and k - 1 zeros, so U = (log(k * spread + alpha) + (k - 1) log alpha) / k. It is
    what a threshold on U is measured against (about -6.5 for k = 20, alpha = 1e-3)."""
    return (float(np.log(k * spread + alpha)) + (k - 1) * float(np.log(alpha))) / k


def should_retrieve(score: float | None, threshold: float) -> bool:
    """Retrieve when the model is unsure: U above ``threshold``, or no usable sample at all
    (the authors' code scores that case 0, above any threshold they use)."""
    return score is None or score > threshold


def rank_by_uncertainty(scores: Sequence[float | None], answered: Sequence[bool]) -> list[int]:
    """Candidate indices, least uncertain first (self-aware re-ranking): a candidate whose greedy
    continuation is blank, or that has no score, goes last; ties keep the retriever's order."""
    def key(i: int) -> float:
        s = scores[i]
        return s if answered[i] and s is not None else float("inf")

    return sorted(range(len(scores)), key=key)


def usable_answer(answer: str | None) -> bool:
    """An extracted final answer that says something (the authors also refuse one saying "unknown")."""
    return bool(answer and answer.strip()) and "unknown" not in answer.lower()


def choose_strategy(rationales: tuple[str | None, float | None], documents: tuple[str | None, float | None]) -> str:
    """Self-aware reasoning: ``"rationales"`` (answer from the reasoning steps) or ``"documents"``
    (answer from every selected passage), each given as (extracted answer, uncertainty). A side
    without a usable answer loses; otherwise the lower uncertainty wins, the documents on a tie."""
    (r_answer, r_score), (d_answer, d_score) = rationales, documents
    if not usable_answer(r_answer):
        return "documents"
    if not usable_answer(d_answer):
        return "rationales"
    r = float("inf") if r_score is None else r_score
    d = float("inf") if d_score is None else d_score
    return "rationales" if r < d else "documents"
