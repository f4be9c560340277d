"""Stop strings applied to decoded text, the same way for every backend.

`stop` strings are cut off (the text ends where one begins); `stop_after` strings are kept (the
text ends just after one, its trailing spaces not counted). Tokens that reach past the cut are
dropped, so a Generation's text and its tokens stay in step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np


@dataclass
class DecodeState:
    """What has been decoded so far, shared (not copied) with a `stop_when` callback.

    Backends without attention leave `attention_rows` empty and spell `raw_tokens` as plain text
    pieces (a leading space starts a word), which `text.words.merge_words` understands.
    """

    prompt_length: int
    token_ids: list[int]
    pieces: list[str]
    logprobs: list[float]
    entropies: list[float]
    # Attention rows of tokens already fed back (the newest token has none yet).
    attention_rows: list[np.ndarray]
    raw_tokens: list[str]


StopWhen = Callable[[DecodeState], bool]


def stop_position(text: str, stop: Sequence[str], last_piece_len: int) -> int | None:
    """Char position where the earliest stop string begins, searching only where it can be new."""
    best = None
    for s in stop:
        if not s:
            continue
        at = text.find(s, max(0, len(text) - last_piece_len - len(s) + 1))
        if at >= 0 and (best is None or at < best):
            best = at
    return best


def stop_after_position(text: str, stop_after: Sequence[str], last_piece_len: int) -> int | None:
    """Char position just after the earliest `stop_after` match, not counting its trailing spaces.

    ". " ends a sentence only once the next token shows the space, so "1.5" and "Dr. X" need care
    from callers; the token that revealed the end is then trimmed away.
    """
    best = None
    for s in stop_after:
        if not s:
            continue
        at = text.find(s, max(0, len(text) - last_piece_len - len(s) + 1))
        if at >= 0:
            end = at + len(s.rstrip()) if s.strip() else at + len(s)
            best = end if best is None else min(best, end)
    return best


def trim_to(cut: int, ids: list, pieces: list, logprobs: list, entropies: list) -> None:
    """Drop the tokens that reach past `cut`, so text and tokens stay in step."""
    total = 0
    keep = 0
    for piece in pieces:
        if total + len(piece) > cut:
            break
        total += len(piece)
        keep += 1
    for seq in (ids, pieces, logprobs, entropies):
        del seq[keep:]


def check_stops(state: DecodeState, text: str, piece: str, stop: Sequence[str], stop_after: Sequence[str],
                stop_when: StopWhen | None) -> str | None:
    """After a token's ``piece`` was appended to ``state`` (making ``text``): the stop reason when
    decoding ends here (``stop`` and ``stop_after`` strings trim the state's tokens to the cut),
    else None. Backends that decode token by token outside transformers share it."""
    cut, reason = stop_position(text, stop, len(piece)), "stop"
    if cut is None:
        cut, reason = stop_after_position(text, stop_after, len(piece)), "stop_after"
    if cut is not None:
        trim_to(cut, state.token_ids, state.pieces, state.logprobs, state.entropies)
        del state.raw_tokens[len(state.pieces):]
        return reason
    if stop_when is not None and stop_when(state):
        return "callback"
    return None
