"""The prompt's token budget: every prompt fits the model's context window.

A prompt holds the instruction and exemplars, the retrieved documents, the question and the answer
so far; the model then writes up to ``max_new_tokens`` more. When the model states its context
window (``LanguageModel.context_window``), the prompt builder keeps

    prompt tokens + max_new_tokens + PROMPT_MARGIN <= context window

by, in order: (1) nothing at all when the prompt's UTF-8 bytes already fit (a token of a
byte-level BPE or SentencePiece vocabulary covers at least one byte, so bytes bound tokens: the
common case costs no tokenisation, and no request to an HTTP backend); (2) dropping exemplars
from the end, as long as the documents would get less than ``MIN_DOCUMENT_TOKENS`` each;
(3) sharing what is left among the documents, shortest first, each keeping all of its text up to
an equal share of the rest, the longer ones cut (at a word) to their share and marked with " …".
What was cut is recorded in ``Prompt.truncated`` and from there in the answer's trace. A question
is bounded separately (``check_question``): a clear error past ``MAX_QUESTION_CHARS``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from dynrag.errors import ConfigError, DynragError, check_encodable
from dynrag.lm.base import context_window

__all__ = ["MAX_QUESTION_CHARS", "PROMPT_MARGIN", "TokenCounter", "check_question", "context_window",
           "share_out", "squeeze", "truncate_to_tokens"]

# Kept free beyond max_new_tokens: special tokens (BOS), the tokens a stop string overshoots by,
# and the rare merge across the boundary of two separately counted parts.
PROMPT_MARGIN = 16
MIN_DOCUMENT_TOKENS = 64
MAX_QUESTION_CHARS = 4096
TRUNCATION_MARK = " …"

Count = Callable[[str], int]


def check_question(question: str, where: str | None = None) -> None:
    """A question longer than ``MAX_QUESTION_CHARS``, or one holding text UTF-8 cannot encode, is
    an error (``where`` names its source)."""
    prefix = f"{where}: " if where else ""
    check_encodable(question, f"{prefix}the question")
    if len(question) > MAX_QUESTION_CHARS:
        raise DynragError(
            f"{prefix}the question is {len(question):,} characters long, over the limit of "
            f"{MAX_QUESTION_CHARS:,}; ask a shorter question (long material belongs in a corpus: dynrag index)"
        )


def fits_without_counting(text: str, budget: int) -> bool:
    """True when ``text`` surely has at most ``budget`` tokens: its UTF-8 bytes do not exceed it."""
    return len(text) <= budget and len(text.encode("utf-8")) <= budget


class TokenCounter:
    """``lm.count_tokens`` with a bounded cache: builds of one question's prompts count the same
    parts again, and an HTTP backend counts with a request."""

    def __init__(self, lm: Any, size: int = 256):
        self.lm, self.size = lm, size
        self._cache: OrderedDict[str, int] = OrderedDict()

    def __call__(self, text: str) -> int:
        if text in self._cache:
            self._cache.move_to_end(text)
            return self._cache[text]
        n = int(self.lm.count_tokens(text))
        self._cache[text] = n
        if len(self._cache) > self.size:
            self._cache.popitem(last=False)
        return n


def squeeze(text: str, chars: int | None = None) -> str:
    """``text`` with every run of whitespace made one space and the ends stripped, cut to its first
    ``chars`` characters when given. Only as much of ``text`` is split as the cut needs (the squeezed
    form of a prefix is a prefix of the squeezed whole), so a 5 MB passage cut to a few hundred
    tokens costs what a short one does."""
    if chars is None:
        return " ".join(text.split())
    size = max(chars, 0) + 1
    while True:
        part = " ".join(text[:size].split())
        if len(part) >= chars or size >= len(text):
            return part[:max(chars, 0)]
        size *= 2


def truncate_to_tokens(text: str, limit: int, count: Count) -> tuple[str, int]:
    """The longest prefix of ``text`` found (cut at a word where possible) of at most ``limit``
    tokens, and its token count. Tokenises at most about 8 characters a token of ``limit``, so a
    5 MB text costs no more than a short one."""
    if limit <= 0:
        return "", 0
    cut = text[: limit * 8]
    n = count(cut)
    while n > limit and cut:
        keep = max(0, int(len(cut) * limit / n * 0.95))
        space = cut.rfind(" ", 0, keep)
        cut = cut[: space if space > keep * 0.8 else keep].rstrip()
        n = count(cut)
    return cut, n


def share_out(sizes: list[int | None], budget: int) -> list[int]:
    """Water-filling: the token allowance of each part, given the exact size of those that are
    short (None: too long to count, over any share). Shortest first, each part gets all it needs
    up to an equal share of what is left; the rest is shared by the longer ones."""
    order = sorted(range(len(sizes)), key=lambda i: (sizes[i] is None, sizes[i] or 0))
    allowance = [0] * len(sizes)
    remaining, left = max(budget, 0), len(sizes)
    for i in order:
        share = remaining // left
        need = sizes[i]
        allowance[i] = need if need is not None and need <= share else share
        remaining -= allowance[i]
        left -= 1
    return allowance


def too_long(what: str, needed: int, window: int, max_new_tokens: int, model: str) -> ConfigError:
    return ConfigError(
        f"{what} takes {needed:,} tokens, but model {model!r} has a context window of {window:,} tokens, "
        f"{max_new_tokens:,} of them kept for the answer (max_new_tokens) and {PROMPT_MARGIN} spare; "
        "ask a shorter question or lower max_new_tokens"
    )
