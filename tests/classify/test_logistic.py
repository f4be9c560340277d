import numpy as np
import pytest

from dynrag.classify.logistic import fit, loss, predict_proba, sigmoid


def test_sigmoid_by_hand_and_stable_at_the_extremes():
    np.testing.assert_allclose(sigmoid(np.array([0.0, 2.0, -2.0])), [0.5, 1 / (1 + np.exp(-2)), 1 / (1 + np.exp(2))])
    assert sigmoid(np.array([1000.0]))[0] == 1.0 and sigmoid(np.array([-1000.0]))[0] == 0.0


def test_predict_proba_by_hand():
    # z = 1 * 0.5 + 2 * -0.25 + 0.1 = 0.1
    assert predict_proba(np.array([[1.0, 2.0]]), np.array([0.5, -0.25]), 0.1)[0] == pytest.approx(1 / (1 + np.exp(-0.1)))
    assert predict_proba(np.array([1.0, 2.0]), np.array([0.5, -0.25]), 0.1) == pytest.approx(1 / (1 + np.exp(-0.1)))


def test_fit_solves_a_symmetric_problem_whose_optimum_is_known():
    # x = -1 (label 0) and x = +1 (label 1): by symmetry b = 0, and the gradient vanishes where
    # sigmoid(-w) = l2 * w. Solve that by bisection (a different method from fit's Newton steps).
    l2 = 0.1
    lo, hi = 0.0, 20.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if 1 / (1 + np.exp(mid)) > l2 * mid else (lo, mid)
    w, b = fit(np.array([[-1.0], [1.0]]), np.array([0, 1]), l2=l2)
    assert w[0] == pytest.approx(lo, abs=1e-8) and b == pytest.approx(0.0, abs=1e-10)


def test_fit_reaches_a_minimum_of_the_loss():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 3))
    y = (x @ np.array([1.0, -2.0, 0.5]) + 0.3 + rng.normal(scale=0.5, size=60) > 0).astype(int)
    w, b = fit(x, y, l2=0.01)
    best = loss(x, y, w, b, 0.01)
    for d in np.eye(4) * 1e-3:
        assert loss(x, y, w + d[:3], b + d[3], 0.01) > best
        assert loss(x, y, w - d[:3], b - d[3], 0.01) > best
    assert np.mean((predict_proba(x, w, b) >= 0.5) == y) > 0.85


def test_labels_must_be_binary():
    with pytest.raises(ValueError):
        fit(np.zeros((2, 1)), np.array([0, 2]))
