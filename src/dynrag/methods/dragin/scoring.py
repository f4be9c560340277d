"""DRAGIN's scores as pure functions on arrays: RIND (when to retrieve) and QFS (what to ask).

Everything here works on *words* (see :func:`dynrag.text.words.merge_words`); the token-to-word
reductions are :func:`word_entropy`, :func:`word_attention` and, for the ``reference`` variant,
:func:`reference_attention_weights`.

Two variants of the attention term exist:

* ``paper``: ``a_max(i)`` is the largest attention a *later* generated token pays to word i, taken
  from the last-layer attention rows captured while decoding (mean over heads) and summed over the
  word's tokens; use :func:`word_attention` then :func:`rind_scores`.
* ``reference``: as the authors' released code computes it. One extra forward pass over the
  generated chunk alone (no BOS) yields the last layer's attention ``A[h, t, s]``; each key token s
  gets ``max_t A[h, t, s]`` (max over *all* query rows of the chunk, the token's own row included,
  later sentences too), then the mean over heads (:func:`reference_token_weights`). Per word the
  token weights are summed; within one sentence the word weights are normalised to sum 1 and
  multiplied by the sentence's word count (:func:`reference_word_weights`), and ``S = H * a * s``
  (:func:`reference_scores`); the first sentence with a word over the threshold triggers
  (:func:`reference_trigger`). Its QFS weights come from a fresh pass over question + text + that
  sentence (:func:`reference_qfs_weights`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray


class _Span(Protocol):
    # Any object with a token range works (WordSpan, or a test double); only start/end are read.
    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...


def _vector(values: ArrayLike, name: str, dtype: type = np.float64) -> NDArray:
    arr = np.asarray(values, dtype=dtype)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr


def _check_spans(spans: Sequence[_Span], n_tokens: int, name: str) -> None:
    for k, span in enumerate(spans):
        if not 0 <= span.start < span.end <= n_tokens:
            raise ValueError(
                f"span {k} [{span.start}, {span.end}) is empty or outside the {n_tokens} tokens of {name}"
            )


def rind_scores(entropy: ArrayLike, attention: ArrayLike, content: ArrayLike) -> NDArray[np.float64]:
    """RIND score per generated word: ``S[i] = H[i] * max_{j > i} W[j, i] * s[i]``.

    ``entropy`` (n,) is ``H``; ``attention`` (n, n) is ``W`` with ``W[j, i]`` the attention word j
    pays to word i (only the strictly lower triangle is read); ``content`` (n,) is ``s`` (bool).
    The last word has no later word, so ``S[n-1] = 0``.
    """
    h = _vector(entropy, "entropy")
    s = _vector(content, "content", dtype=bool)
    w = np.asarray(attention, dtype=np.float64)
    n = h.shape[0]
    if n == 0 and w.size == 0 and s.shape[0] == 0:
        return np.zeros(0, dtype=np.float64)
    if w.shape != (n, n):
        raise ValueError(
            f"attention must have shape ({n}, {n}) to match entropy's {n} words, got {w.shape}"
        )
    if s.shape[0] != n:
        raise ValueError(f"content has {s.shape[0]} entries but entropy has {n}")
    # -inf on and above the diagonal so the column max only sees later words, whatever the values.
    later = np.tril(np.ones((n, n), dtype=bool), k=-1)
    a_max = np.where(later, w, -np.inf).max(axis=0)
    a_max[-1] = 0.0
    return h * a_max * s


def reference_scores(entropy: ArrayLike, weights: ArrayLike, content: ArrayLike) -> NDArray[np.float64]:
    """``reference`` variant score per word: ``S[i] = H[i] * a[i] * s[i]``.

    ``weights`` are the sentence-normalised attention weights of
    :func:`reference_attention_weights`; all three arrays have one entry per word.
    """
    h = _vector(entropy, "entropy")
    a = _vector(weights, "weights")
    s = _vector(content, "content", dtype=bool)
    if not h.shape == a.shape == s.shape:
        raise ValueError(
            "entropy, weights and content must have one entry per word; "
            f"got {h.shape[0]}, {a.shape[0]}, {s.shape[0]}"
        )
    return h * a * s


def first_trigger(scores: ArrayLike, theta: float) -> int | None:
    """Index of the first word with ``scores[i] > theta``, or None when no word exceeds it."""
    arr = _vector(scores, "scores")
    hits = np.flatnonzero(arr > theta)
    return int(hits[0]) if hits.size else None


def settled_trigger(
    scores: ArrayLike, entropy: ArrayLike, content: ArrayLike, theta: float, complete: int
) -> int | None:
    """The first trigger, when no text still to come can change which word it is; else None.

    Only the first ``complete`` words are final (the last word may still grow). Later words can only
    raise a score: ``S[i] = H[i] * max_{j > i} W[j, i] * s[i]`` takes a max over more rows, and
    ``W <= 1`` because an attention row sums to 1, so word i can never score above
    ``H[i] * s[i]``. The first complete word over ``theta`` (scores of -inf mark words that may not
    trigger) is therefore the final first trigger when every word before it is either unable to
    trigger (-inf) or bounded by ``H * s <= theta``.
    """
    arr = _vector(scores, "scores")
    h = _vector(entropy, "entropy")
    c = _vector(content, "content", dtype=bool)
    if not arr.shape == h.shape == c.shape:
        raise ValueError(
            f"scores, entropy and content must have one entry per word; got {arr.shape[0]}, {h.shape[0]}, {c.shape[0]}"
        )
    first = first_trigger(arr[: max(0, complete)], theta)
    if first is None:
        return None
    earlier = slice(0, first)
    can_still_cross = np.isfinite(arr[earlier]) & c[earlier] & (h[earlier] > theta)
    return None if can_still_cross.any() else first


def qfs_select(weights: ArrayLike, words: Sequence[str], content: ArrayLike, n: int) -> list[str]:
    """QFS query words: the ``n`` content words with the largest ``weights``, in text order.

    Ties go to the earlier word. When ``n`` is at least the number of content words, all of them
    are returned. Words are returned exactly as given (punctuation is the caller's concern).
    """
    w = _vector(weights, "weights")
    c = _vector(content, "content", dtype=bool)
    if not w.shape[0] == len(words) == c.shape[0]:
        raise ValueError(
            "weights, words and content must have the same length; "
            f"got {w.shape[0]}, {len(words)}, {c.shape[0]}"
        )
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    candidates = np.flatnonzero(c)
    # A stable sort on the negated weight keeps earlier positions first among equal weights.
    order = candidates[np.argsort(-w[candidates], kind="stable")]
    chosen = np.sort(order[:n])
    return [words[i] for i in chosen]


def word_entropy(token_entropy: ArrayLike, spans: Sequence[_Span]) -> NDArray[np.float64]:
    """Per-word entropy ``H_word = mean(H_t for t in word)``."""
    h = _vector(token_entropy, "token_entropy")
    _check_spans(spans, h.shape[0], "token_entropy")
    return np.array([h[sp.start : sp.end].mean() for sp in spans], dtype=np.float64)


def word_attention(token_attention: ArrayLike, spans: Sequence[_Span]) -> NDArray[np.float64]:
    """Word-level attention ``W[j, i] = max_{t in word j} sum_{s in word i} A[t, s]``.

    ``token_attention`` is the (T, T) matrix over generated tokens, ``A[t, s]`` = attention token t
    pays to token s (causal: zeros above the diagonal). Summing over word i's tokens credits the
    whole word; taking the max over word j's tokens means ``max_{j>i} W[j, i]`` is the largest
    attention any later word's token pays to word i. Tokens outside every span (whitespace) are
    ignored as rows and columns.
    """
    a = np.asarray(token_attention, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"token_attention must be a square (T, T) matrix, got shape {a.shape}")
    _check_spans(spans, a.shape[0], "token_attention")
    n = len(spans)
    if n == 0:
        return np.zeros((0, 0), dtype=np.float64)
    # Column sums per word first (T, n), then the row max per word: two cheap reductions.
    per_word_cols = np.stack([a[:, sp.start : sp.end].sum(axis=1) for sp in spans], axis=1)
    return np.stack([per_word_cols[sp.start : sp.end].max(axis=0) for sp in spans], axis=0)


def reference_token_weights(attention_heads: ArrayLike) -> NDArray[np.float64]:
    """Per-token weight of the ``reference`` variant: ``w[s] = mean_h max_t A[h, t, s]``.

    ``attention_heads`` is the last layer's (heads, T, T) attention from a forward pass over the
    generated tokens alone. The max runs over every query row, the key's own row included (as the
    released code does); a (T, T) array is treated as a single head.
    """
    a = np.asarray(attention_heads, dtype=np.float64)
    if a.ndim == 2:
        a = a[None]
    if a.ndim != 3 or a.shape[1] != a.shape[2]:
        raise ValueError(f"attention_heads must have shape (heads, T, T), got {a.shape}")
    if a.shape[1] == 0:
        return np.zeros(0, dtype=np.float64)
    return a.max(axis=1).mean(axis=0)


def reference_attention_weights(token_weights: ArrayLike, spans: Sequence[_Span]) -> NDArray[np.float64]:
    """Sentence-normalised word weights: ``a[i] = n * u[i] / sum_k u[k]``, ``u[i] = sum_{t in i} w[t]``.

    ``spans`` are the words of one sentence (token indices into ``token_weights``) and ``n`` their
    count, so the weights average 1 and a threshold does not depend on sentence length. All-zero
    attention gives all-zero weights rather than a division by zero.
    """
    w = _vector(token_weights, "token_weights")
    _check_spans(spans, w.shape[0], "token_weights")
    n = len(spans)
    if n == 0:
        return np.zeros(0, dtype=np.float64)
    per_word = np.array([w[sp.start : sp.end].sum() for sp in spans], dtype=np.float64)
    total = per_word.sum()
    if total == 0:
        return np.zeros(n, dtype=np.float64)
    return per_word / total * n



def reference_word_weights(
    token_weights: ArrayLike, spans: Sequence[_Span], sentence: ArrayLike
) -> NDArray[np.float64]:
    """:func:`reference_attention_weights` applied sentence by sentence.

    ``token_weights`` come from one pass over the *whole* generated chunk, so the maximum behind each
    weight runs over every later query row of the chunk, later sentences included (the authors'
    code normalises per sentence but never truncates the pass). ``sentence`` (one entry per word)
    numbers the sentences; words of one sentence must be contiguous.
    """
    sent = _vector(sentence, "sentence", dtype=np.int64)
    if sent.shape[0] != len(spans):
        raise ValueError(f"sentence has {sent.shape[0]} entries but there are {len(spans)} words")
    out = np.zeros(len(spans), dtype=np.float64)
    for s in np.unique(sent):
        members = np.flatnonzero(sent == s)
        out[members] = reference_attention_weights(token_weights, [spans[i] for i in members])
    return out


def reference_trigger(
    scores: ArrayLike, sentence: ArrayLike, theta: float
) -> tuple[int, NDArray[np.int64]] | None:
    """(sentence number, words over ``theta`` in it) for the first sentence holding such a word.

    ``scores`` already carry the semantic indicator (0 for stopwords), so a sentence whose only
    over-threshold words are stopwords does not trigger (``stopword_trigger=skip``). The released
    code does trigger there (:func:`authors_trigger`, ``stopword_trigger=authors``).
    """
    arr = _vector(scores, "scores")
    sent = _vector(sentence, "sentence", dtype=np.int64)
    if arr.shape != sent.shape:
        raise ValueError(f"scores has {arr.shape[0]} entries but sentence has {sent.shape[0]}")
    first = first_trigger(arr, theta)
    if first is None:
        return None
    s = int(sent[first])
    return s, np.flatnonzero((sent == s) & (arr > theta))


def authors_trigger(
    unfiltered: ArrayLike, content: ArrayLike, sentence: ArrayLike, theta: float
) -> tuple[int, int, NDArray[np.int64]] | None:
    """The authors' trigger: (sentence number, first word over ``theta``, content words over it there).

    ``unfiltered`` is ``H * a`` without the semantic indicator. As in the authors' released code,
    any word over ``theta`` (a stopword too) makes its sentence the triggering one, and the
    part-of-speech filter runs afterwards, on the hit words only: the hits (third item) may be
    empty. With no hits their QFS weights are 0/0 for every word, and a sort over those keys keeps
    text order, so the query is the first content words of the pass (roughly the question);
    :func:`reference_qfs_weights` with no hits gives all-equal weights, which select the same words.
    """
    arr = _vector(unfiltered, "unfiltered")
    c = _vector(content, "content", dtype=bool)
    sent = _vector(sentence, "sentence", dtype=np.int64)
    if not arr.shape == c.shape == sent.shape:
        raise ValueError(
            f"unfiltered, content and sentence must have one entry per word; got {arr.shape[0]}, {c.shape[0]}, {sent.shape[0]}"
        )
    first = first_trigger(arr, theta)
    if first is None:
        return None
    s = int(sent[first])
    return s, first, np.flatnonzero((sent == s) & (arr > theta) & c)


def reference_qfs_weights(
    attention: ArrayLike, spans: Sequence[_Span], hits: Sequence[int]
) -> NDArray[np.float64]:
    """QFS word weights of the ``reference`` variant, from a fresh pass over question + text + sentence.

    ``attention`` is that pass's (T, T) last-layer attention (mean over heads), ``spans`` its words
    and ``hits`` the indices (into ``spans``) of the words whose RIND score exceeded the threshold.
    For a hit word over tokens ``[r0, r1)``, each token ``t`` contributes the attention row of the
    position *preceding* it, ``A[t - 1, :r0]``, over the positions before the word, renormalised to
    sum 1 (the word's own earlier tokens are cut away); the contributions are averaged over the
    word's tokens (a token at position 0 has no preceding row and counts as zero), summed per word
    over their tokens, and averaged over all hit words. Positions outside every span (a BOS token)
    share the normalisation but get no weight. No hits gives all zeros.
    """
    a = np.asarray(attention, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"attention must be a square (T, T) matrix, got shape {a.shape}")
    t_len = a.shape[0]
    _check_spans(spans, t_len, "attention")
    for h in hits:
        if not 0 <= h < len(spans):
            raise ValueError(f"hit {h} is not a word index (there are {len(spans)} words)")
    forward = np.zeros(t_len, dtype=np.float64)
    for h in hits:
        r0, r1 = spans[h].start, spans[h].end
        acc = np.zeros(t_len, dtype=np.float64)
        for t in range(max(r0, 1), r1):
            row = a[t - 1, :r0]
            total = row.sum()
            if total > 0:
                acc[:r0] += row / total
        forward += acc / (r1 - r0)
    if hits:
        forward /= len(hits)
    return np.array([forward[sp.start : sp.end].sum() for sp in spans], dtype=np.float64)


__all__ = [
    "authors_trigger",
    "first_trigger",
    "qfs_select",
    "reference_attention_weights",
    "reference_qfs_weights",
    "reference_trigger",
    "reference_word_weights",
    "reference_scores",
    "reference_token_weights",
    "rind_scores",
    "settled_trigger",
    "word_attention",
    "word_entropy",
]
