"""The line layout of passages.jsonl: one passage encoded as one line (``encode_line``), and the
strings sliced back out of a memory-mapped line without decoding JSON (``PassageLines``)."""

from __future__ import annotations

import mmap
from json.decoder import scanstring  # type: ignore[attr-defined]
from json.encoder import encode_basestring, encode_basestring_ascii  # type: ignore[attr-defined]

import numpy as np

from dynrag.corpus.passage import Passage

# Line layout written by encode_line; hit_lists slices the string literals out by these lengths.
_ID_PREFIX, _TITLE_SEP, _TEXT_SEP, _LINE_END = '{"id": ', ', "title": ', ', "text": ', "}\n"


def _layout(pid: str, title: str, text: str) -> tuple[str, int, int]:
    title_at = len(_ID_PREFIX) + len(pid) + len(_TITLE_SEP)
    text_at = title_at + len(title) + len(_TEXT_SEP)
    line = "".join((_ID_PREFIX, pid, _TITLE_SEP, title, _TEXT_SEP, text, _LINE_END))
    return line, title_at, text_at


def encode_line(p: Passage) -> tuple[bytes, int, int]:
    """One passages.jsonl line and the character offsets of its title and text literals."""
    line, title_at, text_at = _layout(encode_basestring(p.id), encode_basestring(p.title), encode_basestring(p.text))
    try:
        return line.encode("utf-8"), title_at, text_at
    except UnicodeEncodeError:
        # A lone surrogate (from a "\ud800" escape in the source JSON) has no UTF-8 form;
        # \u-escaping the whole line, as json.dumps does by default, still round-trips.
        line, title_at, text_at = _layout(
            encode_basestring_ascii(p.id), encode_basestring_ascii(p.title), encode_basestring_ascii(p.text)
        )
        return line.encode("ascii"), title_at, text_at


class PassageLines:
    """passages.jsonl memory-mapped with its line offsets and field offsets: what a StoredHit reads
    its strings from. Hits keep it alive, so they stay readable after their store is closed (the
    map goes when the last of them does; on Linux it also survives the index being rebuilt)."""

    __slots__ = ("mm", "offsets", "fields")

    def __init__(self, mm: mmap.mmap, offsets: np.ndarray, fields: np.ndarray):
        # Plain ndarray views: slicing a np.memmap runs its Python __array_finalize__ (~1 µs).
        self.mm, self.offsets, self.fields = mm, offsets.view(np.ndarray), fields.view(np.ndarray)

    def strings(self, row: int) -> tuple[str, str, str]:
        """(id, title, text) of the passage at ``row``, sliced out of its line."""
        offsets, fields = self.offsets, self.fields
        line = self.mm[offsets.item(row) : offsets.item(row + 1)].decode("utf-8")
        a, b = fields.item(row, 0), fields.item(row, 1)
        id_at = len(_ID_PREFIX) + 1
        # A line without backslashes holds its strings verbatim between the quotes, so only
        # lines with escapes pay for a JSON string scan.
        if line.find("\\", id_at) < 0:
            return (line[id_at : a - len(_TITLE_SEP) - 1], line[a + 1 : b - len(_TEXT_SEP) - 1],
                    line[b + 1 : -len(_LINE_END) - 1])
        return scanstring(line, id_at)[0], scanstring(line, a + 1)[0], scanstring(line, b + 1)[0]
