"""ETC's trigger as pure functions on arrays: the trend of entropy, not its level (Li et al., AAAI 2026).

Over the entropy sequence ``H`` of the generated words (or tokens: any units), with ``content``
marking the units that take part (the authors skip function words):

* first difference ``d1[i] = H[i] - H[j]``, ``j`` the nearest content unit before ``i``; 0 for a
  function unit and for the first content unit;
* second difference ``d2[i] = d1[i] - d1[j]``, ``j`` the nearest unit at position 1 or later before
  ``i`` whose ``d1`` is not 0; 0 for a function unit, for ``i < 2`` and when there is no such ``j``;
* dynamic smoothing, over the units whose ``d2`` is not 0 in order (``m`` is 0 elsewhere): with
  ``E`` the running mean of those ``d2`` so far (this one included) and ``p`` the previous such
  ``d2`` (0 before the first), ``w = |p - E| / (|d2 - E| + |p - E|)``, ``a = 0.9 + 0.1 w`` and
  ``m = a * d2 + (1 - a) * p``. ``a`` stays in [0.9, 1]: a previous value far from the mean (an
  outlier) counts less.

The rules are the authors' released code's (WisdomShell/ETC, ``generate.py``), read and written
here anew; the paper's own text was not available to check them against (docs/methods.md, "etc").
Retrieval fires at the first unit whose score (``m``, or ``m`` times a sentence-normalised
attention weight) is over the threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dynrag.methods.dragin.scoring import first_trigger
from dynrag.text.words import WordSpan

SMOOTHING_FLOOR = 0.9  # a = 0.9 + 0.1 w: the newest second difference keeps at least 90% weight


@dataclass(frozen=True)
class Trend:
    """Per unit: the first and second differences of the entropy and their smoothed value."""

    d1: NDArray[np.float64]
    d2: NDArray[np.float64]
    smoothed: NDArray[np.float64]


def _pair(entropy: ArrayLike, content: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    h = np.asarray(entropy, dtype=np.float64)
    c = np.asarray(content, dtype=bool)
    if h.ndim != 1 or c.shape != h.shape:
        raise ValueError(f"entropy and content must be one-dimensional and of one length; got {h.shape} and {c.shape}")
    return h, c


def first_differences(entropy: ArrayLike, content: ArrayLike) -> NDArray[np.float64]:
    """``d1``: each content unit's entropy minus that of the content unit before it."""
    h, c = _pair(entropy, content)
    d1 = np.zeros_like(h)
    previous: int | None = None
    for i in np.flatnonzero(c):
        if previous is not None:
            d1[i] = h[i] - h[previous]
        previous = int(i)
    return d1


def second_differences(d1: ArrayLike, content: ArrayLike) -> NDArray[np.float64]:
    """``d2``: each content unit's ``d1`` minus the latest nonzero ``d1`` before it (from unit 1 on)."""
    first, c = _pair(d1, content)
    d2 = np.zeros_like(first)
    latest: int | None = None  # the last unit at position >= 1 with a nonzero d1, so far
    for i in range(len(first)):
        if i >= 2 and c[i] and latest is not None:
            d2[i] = first[i] - first[latest]
        if i >= 1 and first[i] != 0:
            latest = i
    return d2


def smooth(d2: ArrayLike) -> NDArray[np.float64]:
    """The dynamically smoothed second differences (0 where ``d2`` is 0)."""
    values = np.asarray(d2, dtype=np.float64)
    out = np.zeros_like(values)
    total, count, previous = 0.0, 0, 0.0
    for i in np.flatnonzero(values):
        current = float(values[i])
        count += 1
        total += current
        mean = total / count
        far = abs(previous - mean)
        spread = abs(current - mean) + far
        # Both distances 0 means current == previous == mean: every weight gives current itself.
        # (The authors' code divides 0 by 0 there, and the NaN never triggers.)
        w = far / spread if spread > 0 else 1.0
        a = SMOOTHING_FLOOR + (1 - SMOOTHING_FLOOR) * w
        out[i] = a * current + (1 - a) * previous
        previous = current  # the raw value, not the smoothed one, as the authors' code keeps it
    return out


def entropy_trend(entropy: ArrayLike, content: ArrayLike) -> Trend:
    """The three signals of an entropy sequence."""
    d1 = first_differences(entropy, content)
    d2 = second_differences(d1, content)
    return Trend(d1, d2, smooth(d2))


def word_max(token_values: ArrayLike, spans: Sequence[WordSpan]) -> NDArray[np.float64]:
    """Per word, the largest of its tokens' values (the authors' word entropy; DRAGIN's is the mean)."""
    values = np.asarray(token_values, dtype=np.float64)
    return np.array([values[s.start : s.end].max() for s in spans], dtype=np.float64)


def attention_focus(word_attention: ArrayLike) -> NDArray[np.float64]:
    """Per word, the largest attention it pays to any generated word up to itself: the row maximum of
    a (n, n) causal word matrix ``W[t, k]`` (the authors' weight: how word t attends, not how it is
    attended to, which is DRAGIN's)."""
    w = np.asarray(word_attention, dtype=np.float64)
    if w.ndim != 2 or w.shape[0] != w.shape[1]:
        raise ValueError(f"word_attention must be a square matrix, got shape {w.shape}")
    return np.tril(w).max(axis=1) if len(w) else np.zeros(0)


def per_sentence(weights: ArrayLike, sentence: ArrayLike) -> NDArray[np.float64]:
    """Weights scaled within each sentence to average 1 (divided by their sum, times the word count)."""
    w = np.asarray(weights, dtype=np.float64)
    s = np.asarray(sentence)
    out = np.zeros_like(w)
    for k in np.unique(s):
        members = s == k
        out[members] = w[members] * members.sum() / (w[members].sum() + 1e-10)
    return out


def trend_trigger(scores: ArrayLike, theta: float, absolute: bool = False) -> int | None:
    """The first unit with ``score > theta`` (``|score| > theta`` when ``absolute``, the authors'
    ``thres_abs``); -inf marks units that may not trigger."""
    values = np.asarray(scores, dtype=np.float64)
    return first_trigger(np.where(np.isfinite(values), np.abs(values), -np.inf) if absolute else values, theta)
