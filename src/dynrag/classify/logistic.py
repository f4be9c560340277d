"""Binary logistic regression in numpy: p(y=1 | x) = sigmoid(x . w + b), L2-penalised, fitted by
Newton's method (a few exact steps; deterministic, no learning rate to tune)."""

from __future__ import annotations

import numpy as np


def sigmoid(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    ez = np.exp(z[~pos])
    out[~pos] = ez / (1.0 + ez)
    return out


def predict_proba(x: np.ndarray, w: np.ndarray, b: float) -> np.ndarray:
    """p(y=1) for each row of x (n, d), or for one vector x (d,)."""
    x = np.asarray(x, dtype=np.float64)
    return sigmoid(x @ np.asarray(w, dtype=np.float64) + float(b))


def loss(x: np.ndarray, y: np.ndarray, w: np.ndarray, b: float, l2: float) -> float:
    """Mean negative log-likelihood plus (l2 / 2) * |w|^2 (the bias is not penalised)."""
    z = np.asarray(x, dtype=np.float64) @ w + b
    y = np.asarray(y, dtype=np.float64)
    nll = np.mean(np.logaddexp(0.0, z) - y * z)
    return float(nll + 0.5 * l2 * np.dot(w, w))


def fit(x: np.ndarray, y: np.ndarray, l2: float = 1e-3, steps: int = 50, tol: float = 1e-10) -> tuple[np.ndarray, float]:
    """(w, b) minimising `loss`; y holds 0/1 labels."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n, d = x.shape
    if set(np.unique(y)) - {0.0, 1.0}:
        raise ValueError("labels must be 0 or 1")
    xb = np.hstack([x, np.ones((n, 1))])  # last column: the bias
    theta = np.zeros(d + 1)
    penalty = np.full(d + 1, l2)
    penalty[-1] = 0.0
    for _ in range(steps):
        p = sigmoid(xb @ theta)
        grad = xb.T @ (p - y) / n + penalty * theta
        hess = (xb.T * (p * (1 - p))) @ xb / n + np.diag(penalty) + 1e-12 * np.eye(d + 1)
        step = np.linalg.solve(hess, grad)
        theta -= step
        if float(np.abs(step).max()) < tol:
            break
    return theta[:-1], float(theta[-1])
