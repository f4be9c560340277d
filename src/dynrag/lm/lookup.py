"""Prompt-lookup drafts: guess the next tokens by copying what followed the latest words before.

Retrieval-augmented answers copy a lot: names and phrases of the retrieved documents, the
question's words, the exemplars' answer pattern. When the last few tokens of the sequence
(prompt + output so far) occurred earlier in it, the tokens that followed that occurrence are a
cheap guess at what comes next. `HFLanguageModel.generate` feeds the guess together with the
newest token in one forward pass and keeps the guessed tokens for as long as greedy decoding
would have chosen them itself, so the output is the one-token-at-a-time output (to float rounding);
only the number of forward passes changes.

Why a guess shorter than `min_tokens` is not tried: on a CPU a forward pass over two or three new
tokens costs about twice one over a single token (the small matrix products stop being
memory-bound), while four to six cost little more than two (benchmarks/LOG.md), so a short
guess loses time even when it is right.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DEFAULT_DRAFT_TOKENS = 5
MAX_NGRAM = 4  # the longest suffix matched; a longer match is rarely found and no better a guess
MIN_DRAFT_TOKENS = 3


def lookup_draft(
    history: Sequence[int] | np.ndarray,
    max_tokens: int,
    max_ngram: int = MAX_NGRAM,
    min_tokens: int = MIN_DRAFT_TOKENS,
) -> list[int]:
    """Up to `max_tokens` tokens that followed the latest earlier occurrence of the history's
    longest matching suffix (`max_ngram` tokens down to one), or [] when no occurrence is
    followed by at least `min_tokens` tokens.

    Longer suffixes are tried first, and among the occurrences of one suffix the latest one that
    leaves `min_tokens` tokens to copy wins (recent text is the best guess of what comes next).
    """
    if max_tokens < 1:
        return []
    h = np.asarray(history, dtype=np.int64)
    length = h.shape[0]
    need = max(1, min(min_tokens, max_tokens))
    for n in range(min(max_ngram, length - 1), 0, -1):
        # An occurrence starts at s < length - n (not the suffix itself) and leaves `need` tokens
        # after it: s + n + need <= length.
        last_start = length - n - need
        if last_start < 0:
            continue
        match = np.ones(last_start + 1, dtype=bool)
        for j in range(n):
            match &= h[j : j + last_start + 1] == h[length - n + j]
        starts = np.flatnonzero(match)
        if starts.size:
            s = int(starts[-1]) + n
            return h[s : s + max_tokens].tolist()
    return []
