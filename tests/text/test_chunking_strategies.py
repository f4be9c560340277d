"""Sliding window and small-to-big chunking, and their chunk specs."""

import pytest

from dynrag.corpus import Passage
from dynrag.errors import ConfigError
from dynrag.text.chunking import (
    chunk_by_tokens,
    parse_chunk_spec,
    small_chunk_parent,
    small_chunks_keeping_large,
    small_to_big,
)


def words(n: int, prefix: str = "w") -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


def test_the_sliding_window_strategy_is_token_windows_with_overlap():
    p = Passage("d", "T", words(11))
    assert parse_chunk_spec("tokens:5:2").apply(p) == chunk_by_tokens(p, 5, 2)
    assert [c.text for c in chunk_by_tokens(p, 5, 2)] == [
        "w0 w1 w2 w3 w4", "w3 w4 w5 w6 w7", "w6 w7 w8 w9 w10",
    ]


def test_small_to_big_ids_and_text():
    p = Passage("doc", "Title", words(10))
    groups = small_to_big(p, small_size=3, large_size=6, small_overlap=0, large_overlap=2)
    larges = [g[0] for g in groups]
    assert [(c.id, c.text) for c in larges] == [("doc#0", "w0 w1 w2 w3 w4 w5"), ("doc#1", "w4 w5 w6 w7 w8 w9")]
    smalls = groups[0][1]
    assert [(c.id, c.text, c.title) for c in smalls] == [
        ("doc#0/s0", "w0 w1 w2", "Title"),
        ("doc#0/s1", "w3 w4 w5", "Title"),
    ]
    assert [c.id for c in groups[1][1]] == ["doc#1/s0", "doc#1/s1"]
    # Every small chunk's text lies inside its large chunk.
    for large, chunk_smalls in groups:
        for s in chunk_smalls:
            assert s.text in large.text and small_chunk_parent(s.id) == large.id
    # A short passage: one large chunk with the passage's own id, still one suffixed small chunk.
    (large, chunk_smalls), = small_to_big(Passage("x/s1", "", "a b"), 3, 6)
    assert large.id == "x/s1" and [s.id for s in chunk_smalls] == ["x/s1/s0"]
    assert small_chunk_parent("x/s1/s0") == "x/s1"  # ids containing the separator still invert
    (large, chunk_smalls), = small_to_big(Passage("e", "", ""), 3, 6)
    assert [s.text for s in chunk_smalls] == [""]
    with pytest.raises(ValueError):
        small_to_big(p, 7, 6)
    with pytest.raises(ValueError):
        small_chunk_parent("doc#0")


def test_small_to_big_chunk_spec():
    spec = parse_chunk_spec("small-to-big:3:6:1")
    assert (spec.kind, spec.size, spec.large, spec.overlap) == ("small-to-big", 3, 6, 1)
    assert str(spec) == "small-to-big:3:6:1" and parse_chunk_spec(str(spec)) == spec
    assert str(parse_chunk_spec("small-to-big:175:512")) == "small-to-big:175:512:0"
    p = Passage("d", "T", words(10))
    # apply() gives the small chunks; small_chunks_keeping_large hands over the large ones too
    larges: list[Passage] = []
    smalls = list(small_chunks_keeping_large([p], spec, larges.append))
    assert smalls == spec.apply(p)
    assert [(large, s) for large, s in small_to_big(p, 3, 6, 1, 1)] == [
        (large, [s for s in smalls if small_chunk_parent(s.id) == large.id]) for large in larges
    ]
    for bad, message in [
        ("small-to-big:6:3", "must not be smaller than small ones"),
        ("small-to-big:3", "small-to-big:SMALL:LARGE"),
        ("small-to-big:3:6:3", "overlap must be"),
        ("tokens:3:1:2", "small-to-big:SMALL:LARGE"),
    ]:
        with pytest.raises(ConfigError, match=message):
            parse_chunk_spec(bad)
