"""Merge tokenizer tokens into words, so that DRAGIN scores words rather than sub-word pieces.

Rule: a word starts at the first token, at a token whose text begins with whitespace,
and at any token that follows a token whose text ends with whitespace (a newline, or a lone space
token such as SentencePiece's ``▁`` before digits). A token made only of whitespace belongs to no
word. Everything else, punctuation included, continues the current word: "Paris" + "." is the one
word "Paris.", and the content-word test strips the punctuation later.

Tokens arrive as ``tokenizer.convert_ids_to_tokens(ids)`` strings. Three spellings are understood:

* SentencePiece (Gemma, Llama-2): ``▁`` is a space; ``<0xNN>`` byte-fallback tokens are raw bytes;
  newlines are literal ``\\n`` (Gemma) or ``<0x0A>`` (Llama-2).
* Byte-level BPE (GPT-2, SmolLM2, Llama-3): every byte is spelled by one printable character of
  GPT-2's byte-to-unicode table (``Ġ`` space, ``Ċ`` newline, ``ĉ`` tab, ``Ã©`` for "é" ...).
* Plain text pieces (``tokenizer.decode([id])``), where a space is a literal leading ``" "``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

Scheme = Literal["auto", "sentencepiece", "byte_level", "plain"]

_SP_SPACE = "\u2581"  # "▁"
_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")
_WHITESPACE_BYTES = frozenset(b" \t\n\r\x0b\x0c")


@dataclass(frozen=True)
class WordSpan:
    """One word: its text (no surrounding whitespace) and its token range ``[start, end)``."""

    text: str
    start: int
    end: int


@lru_cache(maxsize=1)
def _byte_level_decoder() -> dict[str, int]:
    """Reverse of GPT-2's byte-to-unicode table: printable character -> the byte it spells.

    Bytes that are already visible Latin-1 characters ("!".."~", "¡".."¬", "®".."ÿ") stand for
    themselves; the remaining 68 (control bytes, space, DEL, NBSP, soft hyphen, ...) are assigned
    the code points 256, 257, ... in byte order, which is why a space reads "Ġ" (256 + 32).
    """
    visible = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    decoder = {chr(b): b for b in visible}
    shifted = 0
    for b in range(256):
        if b not in decoder.values():
            decoder[chr(256 + shifted)] = b
            shifted += 1
    return decoder


def _detect_scheme(raw_tokens: list[str]) -> Scheme:
    decoder = _byte_level_decoder()
    if any(tok.startswith(" ") for tok in raw_tokens):
        return "plain"
    if any(_SP_SPACE in tok for tok in raw_tokens):
        return "sentencepiece"
    if all(ch in decoder for tok in raw_tokens for ch in tok):
        # Pure printable ASCII decodes identically under every scheme, so only the remapped
        # characters (code point >= 256) or valid multi-byte UTF-8 make byte-level the right call;
        # without this a SentencePiece "café" would be misread as the Latin-1 byte 0xE9.
        if any(ord(ch) >= 256 for tok in raw_tokens for ch in tok):
            return "byte_level"
        try:
            bytes(decoder[ch] for tok in raw_tokens for ch in tok).decode("utf-8")
        except UnicodeDecodeError:
            return "sentencepiece"
        return "byte_level"
    return "sentencepiece"


def _token_bytes(token: str, scheme: Scheme) -> bytes:
    if scheme == "byte_level":
        decoder = _byte_level_decoder()
        # A token outside the table (an added special token such as "<|im_end|>") is kept as text.
        if all(ch in decoder for ch in token):
            return bytes(decoder[ch] for ch in token)
        return token.encode("utf-8")
    if scheme == "sentencepiece":
        match = _BYTE_FALLBACK.match(token)
        if match:
            return bytes([int(match.group(1), 16)])
        return token.replace(_SP_SPACE, " ").encode("utf-8")
    return token.encode("utf-8")


def token_bytes(raw_tokens: list[str], scheme: Scheme = "auto") -> list[bytes]:
    """The bytes each raw token stands for (markers decoded), one entry per token."""
    resolved = _detect_scheme(raw_tokens) if scheme == "auto" else scheme
    return [_token_bytes(tok, resolved) for tok in raw_tokens]


def merge_words(
    raw_tokens: list[str],
    texts: list[str] | None = None,
    *,
    scheme: Scheme = "auto",
) -> list[WordSpan]:
    """Group ``raw_tokens`` into words; return one :class:`WordSpan` per word, in order.

    Boundaries always come from ``raw_tokens`` (their markers are reliable; single-token decodes
    of some tokenizers drop the leading space). The word text is ``"".join(texts[start:end])``
    when ``texts`` is given, otherwise the UTF-8 decoding of the tokens' bytes, so characters split
    across byte-level tokens ("東" = three tokens) come out whole. Surrounding whitespace is
    stripped from the text. Tokens that decode to nothing (special tokens decoded with
    ``skip_special_tokens``) neither start nor end a word.

    ``scheme`` forces the marker spelling; ``"auto"`` infers it from the tokens.
    """
    if texts is not None and len(texts) != len(raw_tokens):
        raise ValueError(f"texts has {len(texts)} pieces but raw_tokens has {len(raw_tokens)} tokens")
    pieces = token_bytes(raw_tokens, scheme)
    if texts is not None:
        # A token whose decoded piece is empty (a special token under skip_special_tokens) is
        # invisible in the text, so it must not glue itself onto, or split, a word.
        pieces = [b"" if text == "" else piece for piece, text in zip(pieces, texts)]

    spans: list[tuple[int, int]] = []
    start: int | None = None
    end = 0
    boundary_pending = True  # the first token always starts a word
    for i, piece in enumerate(pieces):
        if not piece:
            continue
        whitespace_only = all(b in _WHITESPACE_BYTES for b in piece)
        if whitespace_only:
            if start is not None:
                spans.append((start, end))
                start = None
            boundary_pending = True
            continue
        if start is None or boundary_pending or piece[0] in _WHITESPACE_BYTES:
            if start is not None:
                spans.append((start, end))
            start = i
        end = i + 1
        # A token ending in whitespace (".\n" merged into one piece) closes its word.
        boundary_pending = piece[-1] in _WHITESPACE_BYTES
    if start is not None:
        spans.append((start, end))

    words: list[WordSpan] = []
    for s, e in spans:
        if texts is not None:
            text = "".join(texts[s:e])
        else:
            text = b"".join(pieces[s:e]).decode("utf-8", errors="replace")
        words.append(WordSpan(text=text.strip(), start=s, end=e))
    return words


__all__ = ["Scheme", "WordSpan", "merge_words", "token_bytes"]
