import pytest

from dynrag.corpus import Passage
from dynrag.errors import ConfigError
from dynrag.text.chunking import (
    ChunkSpec,
    chunk_by_sentences,
    chunk_by_tokens,
    chunk_passages,
    parse_chunk_spec,
)


def words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


def test_token_windows_overlap_arithmetic():
    # 11 words, size 4, overlap 1 -> step 3: starts 0, 3, 6, 9; the last window is short.
    chunks = chunk_by_tokens(Passage("d", "T", words(11)), size=4, overlap=1)
    assert [c.text for c in chunks] == [
        "w0 w1 w2 w3",
        "w3 w4 w5 w6",
        "w6 w7 w8 w9",
        "w9 w10",
    ]
    assert [c.id for c in chunks] == ["d#0", "d#1", "d#2", "d#3"]
    assert {c.title for c in chunks} == {"T"}


def test_token_windows_ending_exactly_at_the_end():
    # 10 words, size 4, overlap 1: starts 0, 3, 6 and the third window ends at w9.
    chunks = chunk_by_tokens(Passage("d", "", words(10)), size=4, overlap=1)
    assert [c.text.split()[0] for c in chunks] == ["w0", "w3", "w6"]
    assert chunks[-1].text.split()[-1] == "w9"


def test_token_windows_without_overlap_partition_the_words():
    chunks = chunk_by_tokens(Passage("d", "", words(10)), size=5, overlap=0)
    assert [c.text for c in chunks] == [words(5), " ".join(f"w{i}" for i in range(5, 10))]


def test_large_overlap():
    # 7 words, size 5, overlap 4 -> step 1: starts 0, 1, 2 (window 2 reaches w6).
    chunks = chunk_by_tokens(Passage("d", "", words(7)), size=5, overlap=4)
    assert [c.text.split()[0] for c in chunks] == ["w0", "w1", "w2"]


def test_short_passage_stays_whole_with_its_id_and_text():
    p = Passage("d", "T", "  exactly   four words\nhere ")
    assert chunk_by_tokens(p, size=4, overlap=2) == [p]
    assert chunk_by_tokens(Passage("e", "", ""), size=3) == [Passage("e", "", "")]


def test_sentence_windows():
    text = "One apple. Two bees. Three cats. Four dogs. Five eels."
    chunks = chunk_by_sentences(Passage("s", "T", text), sentences_per_chunk=2, overlap_sentences=1)
    assert [c.text for c in chunks] == [
        "One apple. Two bees.",
        "Two bees. Three cats.",
        "Three cats. Four dogs.",
        "Four dogs. Five eels.",
    ]
    assert chunks[0].id == "s#0"
    short = Passage("s", "", "Only one. And two.")
    assert chunk_by_sentences(short, 2) == [short]


@pytest.mark.parametrize("size, overlap", [(0, 0), (3, 3), (3, -1)])
def test_invalid_windows_raise(size, overlap):
    with pytest.raises(ValueError):
        chunk_by_tokens(Passage("d", "", words(10)), size, overlap)


def test_parse_chunk_spec_forms():
    assert parse_chunk_spec("tokens:100:20") == ChunkSpec(kind="tokens", size=100, overlap=20)
    assert parse_chunk_spec("sentences:3:1") == ChunkSpec(kind="sentences", size=3, overlap=1)
    assert parse_chunk_spec("tokens:50") == ChunkSpec(kind="tokens", size=50, overlap=0)
    assert parse_chunk_spec(" None ") == ChunkSpec(kind="none")
    assert str(parse_chunk_spec("tokens:100:20")) == "tokens:100:20"
    assert str(parse_chunk_spec("none")) == "none"


@pytest.mark.parametrize(
    "spec", ["", "words:3", "tokens", "tokens:x", "tokens:0", "tokens:5:5", "none:3", "tokens:1:2:3"]
)
def test_parse_chunk_spec_errors_show_valid_forms(spec):
    with pytest.raises(ConfigError) as e:
        parse_chunk_spec(spec)
    assert "tokens:SIZE[:OVERLAP]" in str(e.value) and "sentences:N[:OVERLAP]" in str(e.value)


def test_chunk_spec_forbids_extra_fields():
    with pytest.raises(ValueError):
        ChunkSpec(kind="tokens", size=3, stride=2)


def test_chunk_passages_streams():
    ps = [Passage("a", "", words(6)), Passage("b", "", words(2))]
    out = list(chunk_passages(iter(ps), parse_chunk_spec("tokens:4:2")))
    assert [c.id for c in out] == ["a#0", "a#1", "b"]
    assert list(chunk_passages(ps, None)) == ps
