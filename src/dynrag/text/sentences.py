"""A small, dependency-free sentence splitter for English prose.

Rules, in order (no model, no download, predictable):
  1. Blank lines always end a sentence (paragraph breaks in markdown and plain text).
  2. A candidate boundary is a run of . ! ? (optionally followed by closing quotes/brackets)
     followed by whitespace.
  3. It is a boundary only if the next character starts a sentence: an upper-case letter, a
     digit, or an opening quote/bracket. So "e.g. hammers" and "3.5" (no space) never split.
  4. A single "." does not split after a known abbreviation ("Dr.", "Mr.", "vs.", "Jan.", ...;
     "No.", "Fig.", "Vol." only before a number), after a single-letter initial
     ("J. R. R. Tolkien"), or after dotted abbreviations like "e.g.", "i.e.", "U.S.".
Known trade-off: a sentence really ending in "U.S." or an initial is joined to the next one.
"""

from __future__ import annotations

import re

# Lower-cased, without the trailing dot. Kept short on purpose: only words that are far more
# often abbreviations than sentence ends. "etc." is left out because it usually ends a sentence.
ABBREVIATIONS = frozenset(
    {
        "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "ft", "rev", "gen", "col",
        "lt", "sgt", "capt", "gov", "sen", "rep", "pres", "hon", "vs", "cf", "approx", "ca",
        "ed", "eds", "inc", "ltd", "co", "corp", "dept", "univ", "assn", "bros",
        "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "al",
    }
)
# Abbreviations only before a number ("No. 5", "Fig. 3"): "no." is also an ordinary word.
NUMBERED_ABBREVIATIONS = frozenset(
    {"no", "nos", "fig", "figs", "eq", "eqs", "vol", "vols", "ch", "sec", "p", "pp", "art"}
)

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
# group 1: the token before the punctuation; group 2: the terminal punctuation run.
_CANDIDATE = re.compile(r"(\S*?)([.!?]+)[\"'\u201d\u2019)\]]*\s+")
_DOTTED = re.compile(r"^(?:[A-Za-z]\.)+[A-Za-z]$")  # e.g / i.e / U.S (trailing dot removed)
_OPENERS = "\"'\u201c\u2018([{"


def split_sentences(text: str) -> list[str]:
    """Split text into sentences (stripped, non-empty) following the rules in the module doc."""
    sentences: list[str] = []
    for paragraph in _PARAGRAPH_BREAK.split(text):
        sentences.extend(_split_paragraph(paragraph))
    return sentences


def _split_paragraph(text: str) -> list[str]:
    out: list[str] = []
    start = 0
    n = len(text)
    for m in _CANDIDATE.finditer(text):
        end = m.end()
        if end >= n:
            break  # trailing punctuation: the remainder below is the last sentence
        if not _starts_sentence(text[end]):
            continue
        if m.group(2) == "." and _is_abbreviation(m.group(1), before_digit=text[end].isdigit()):
            continue
        piece = text[start:end].strip()
        if piece:
            out.append(piece)
        start = end
    rest = text[start:].strip()
    if rest:
        out.append(rest)
    return out


def _starts_sentence(ch: str) -> bool:
    return ch.isupper() or ch.isdigit() or ch in _OPENERS


def _is_abbreviation(token: str, before_digit: bool) -> bool:
    word = token.lstrip(_OPENERS)
    lower = word.lower()
    if before_digit and lower in NUMBERED_ABBREVIATIONS:
        return True
    if len(word) == 1 and word.isalpha():
        return True  # an initial: "J." in "J. R. R. Tolkien"
    return lower in ABBREVIATIONS or bool(_DOTTED.match(word))
