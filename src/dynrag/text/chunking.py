"""Chunking: turn one passage into smaller passages (pure functions, no state).

Windows start every ``size - overlap`` units (0, step, 2*step, ...) and stop at the first
window that reaches the passage end, which may be shorter than ``size``: the arithmetic stays
predictable, no unit is lost and none is repeated beyond the requested overlap. Chunk ids are
``"{id}#{n}"`` with n counting from 0; a passage that already fits in one window keeps its id
and its text untouched, so chunking a corpus of short passages is a no-op.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from dynrag.corpus.passage import Passage
from dynrag.errors import ConfigError, plain_error
from dynrag.text.sentences import split_sentences

CHUNK_SPEC_FORMS = (
    "none, tokens:SIZE[:OVERLAP], sentences:N[:OVERLAP] or small-to-big:SMALL:LARGE[:OVERLAP] "
    "(e.g. tokens:100:20, small-to-big:175:512:20)"
)


def chunk_by_tokens(passage: Passage, size: int, overlap: int = 0) -> list[Passage]:
    """Windows of ``size`` whitespace-separated words, consecutive windows sharing ``overlap``."""
    _check_window(size, overlap)
    words = passage.text.split()
    if len(words) <= size:
        return [passage]
    return [
        Passage(id=f"{passage.id}#{n}", title=passage.title, text=" ".join(window))
        for n, window in enumerate(_windows(words, size, overlap))
    ]


def chunk_by_sentences(
    passage: Passage, sentences_per_chunk: int, overlap_sentences: int = 0
) -> list[Passage]:
    """Windows of ``sentences_per_chunk`` sentences, sharing ``overlap_sentences`` sentences."""
    _check_window(sentences_per_chunk, overlap_sentences)
    sentences = split_sentences(passage.text)
    if len(sentences) <= sentences_per_chunk:
        return [passage]
    return [
        Passage(id=f"{passage.id}#{n}", title=passage.title, text=" ".join(window))
        for n, window in enumerate(_windows(sentences, sentences_per_chunk, overlap_sentences))
    ]


class ChunkSpec(BaseModel):
    """How to chunk a corpus; ``str(spec)`` gives back the form ``parse_chunk_spec`` reads."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["none", "tokens", "sentences", "small-to-big"] = "none"
    size: int | None = None  # small-to-big: the small chunks' size (words)
    overlap: int = 0  # small-to-big: the overlap of small chunks and of large chunks alike
    large: int | None = None  # small-to-big only: the large chunks' size (words)

    @model_validator(mode="after")
    def _check(self) -> ChunkSpec:
        if self.kind == "none":
            if self.size is not None or self.overlap or self.large is not None:
                raise ValueError("kind 'none' takes no size or overlap")
            return self
        if self.size is None or self.size < 1:
            raise ValueError(f"kind {self.kind!r} needs a size >= 1")
        if not 0 <= self.overlap < self.size:
            raise ValueError(f"overlap must be >= 0 and smaller than size ({self.size})")
        if (self.kind == "small-to-big") != (self.large is not None):
            raise ValueError("a large chunk size goes with kind 'small-to-big' only")
        if self.large is not None and self.large < self.size:
            raise ValueError(f"large chunks ({self.large}) must not be smaller than small ones ({self.size})")
        return self

    def apply(self, passage: Passage) -> list[Passage]:
        """The chunks to index. For small-to-big these are the small chunks; the index build
        keeps their large chunks too (``small_chunks_keeping_large``)."""
        if self.kind == "tokens":
            return chunk_by_tokens(passage, self.size or 0, self.overlap)
        if self.kind == "sentences":
            return chunk_by_sentences(passage, self.size or 0, self.overlap)
        if self.kind == "small-to-big":
            return [small for _, smalls in self.small_to_big_groups(passage) for small in smalls]
        return [passage]

    def small_to_big_groups(self, passage: Passage) -> list[tuple[Passage, list[Passage]]]:
        """``small_to_big`` with this spec's sizes (one overlap for small and large chunks)."""
        return small_to_big(passage, self.size or 0, self.large or 0, self.overlap, self.overlap)

    def __str__(self) -> str:
        if self.kind == "small-to-big":
            return f"small-to-big:{self.size}:{self.large}:{self.overlap}"
        return "none" if self.kind == "none" else f"{self.kind}:{self.size}:{self.overlap}"


def parse_chunk_spec(text: str) -> ChunkSpec:
    """Read "none", "tokens:SIZE[:OVERLAP]", "sentences:N[:OVERLAP]" or
    "small-to-big:SMALL:LARGE[:OVERLAP]" into a ChunkSpec."""
    parts = text.strip().lower().split(":")
    kind = parts[0]
    try:
        if kind == "none" and len(parts) == 1:
            return ChunkSpec(kind="none")
        if kind in ("tokens", "sentences") and len(parts) in (2, 3):
            numbers = [int(p) for p in parts[1:]]
            overlap = numbers[1] if len(numbers) == 2 else 0
            return ChunkSpec(kind=kind, size=numbers[0], overlap=overlap)
        if kind == "small-to-big" and len(parts) in (3, 4):
            numbers = [int(p) for p in parts[1:]]
            overlap = numbers[2] if len(numbers) == 3 else 0
            return ChunkSpec(kind=kind, size=numbers[0], large=numbers[1], overlap=overlap)
    except ValueError as e:  # int() and pydantic's ValidationError (a ValueError)
        detail = _first_error(e)
        raise ConfigError(f"invalid chunk spec {text!r}: {detail}; use {CHUNK_SPEC_FORMS}") from e
    raise ConfigError(f"invalid chunk spec {text!r}; use {CHUNK_SPEC_FORMS}")


def chunk_passages(passages: Iterable[Passage], spec: ChunkSpec | None) -> Iterator[Passage]:
    """Stream the chunks of a passage stream (one passage in memory at a time)."""
    if spec is None or spec.kind == "none":
        yield from passages
        return
    for passage in passages:
        yield from spec.apply(passage)


def _windows(units: list[str], size: int, overlap: int) -> Iterator[list[str]]:
    step = size - overlap
    for start in range(0, len(units), step):
        yield units[start : start + size]
        if start + size >= len(units):
            return


def _check_window(size: int, overlap: int) -> None:
    if size < 1:
        raise ValueError(f"chunk size must be >= 1, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"overlap must be >= 0 and smaller than size ({size}), got {overlap}")


def _first_error(e: ValueError) -> str:
    if isinstance(e, ValidationError):
        return plain_error(e.errors()[0])
    return "sizes must be whole numbers"


# ---- small-to-big (best-practices paper, section 3.2.2; its sliding window is tokens:SIZE:OVERLAP) --


SMALL_SEP = "/s"  # small chunk id = "{parent id}/s{n}"; the last SMALL_SEP is always ours


def small_chunk_parent(small_id: str) -> str:
    """The id of the large chunk a small chunk (from ``small_to_big``) lies in."""
    parent, sep, n = small_id.rpartition(SMALL_SEP)
    if not sep or not n.isdigit():
        raise ValueError(f"{small_id!r} is not a small-chunk id (expected '<parent>{SMALL_SEP}<n>')")
    return parent


def small_to_big(
    passage: Passage,
    small_size: int,
    large_size: int,
    small_overlap: int = 0,
    large_overlap: int = 0,
) -> list[tuple[Passage, list[Passage]]]:
    """Small-to-big chunking: ``[(large chunk, its small chunks), ...]``.

    Large chunks are sliding windows of ``large_size`` words (ids as ``chunk_by_tokens``: the
    passage's own id when it fits in one). Each large chunk is cut into windows of ``small_size``
    words with ids ``"{large id}/s{n}"`` (always suffixed, so ``small_chunk_parent`` inverts
    it). Index the small chunks; return their large chunks (``SmallToBigRetriever``). The paper
    used 175-token small and 512-token large chunks with 20 tokens of overlap.
    """
    if small_size > large_size:
        raise ValueError(f"small chunks ({small_size}) must not be larger than large ones ({large_size})")
    out = []
    for large in chunk_by_tokens(passage, large_size, large_overlap):
        words = large.text.split()
        windows = list(_windows(words, small_size, small_overlap)) if words else [[]]
        smalls = [
            Passage(id=f"{large.id}{SMALL_SEP}{n}", title=large.title, text=" ".join(w))
            for n, w in enumerate(windows)
        ]
        out.append((large, smalls))
    return out


def small_chunks_keeping_large(
    passages: Iterable[Passage], spec: ChunkSpec, large_out: Callable[[Passage], None]
) -> Iterator[Passage]:
    """Stream the small chunks of a small-to-big ``spec``, handing each large chunk to
    ``large_out`` before its small chunks (the index build writes them to a file)."""
    for passage in passages:
        for large, smalls in spec.small_to_big_groups(passage):
            large_out(large)
            yield from smalls
