"""Merging tokenizer tokens into words: hand-written token lists, then the two bundled tokenizers."""

import pytest

from dynrag.text.words import WordSpan, merge_words, token_bytes


def texts_of(words):
    return [w.text for w in words]


def test_byte_level_markers():
    # "ĠVel m ora" is one word; "Ġ" alone before the digits makes "1887." its own word; "Ċ" is a
    # newline that forms no word and starts a new one for "Its".
    toks = ["The", "ĠVel", "m", "ora", "Ġin", "Ġ", "1", "8", "8", "7", ".",
            "Ċ", "Its", "Ġengineer", ","]
    words = merge_words(toks)
    assert words == [
        WordSpan("The", 0, 1),
        WordSpan("Velmora", 1, 4),
        WordSpan("in", 4, 5),
        WordSpan("1887.", 6, 11),
        WordSpan("Its", 12, 13),
        WordSpan("engineer,", 13, 15),
    ]


def test_byte_level_multibyte_characters_are_decoded_across_tokens():
    # "Ã©" is the two bytes of "é"; "æ Ŀ ±" are the three bytes of "東" split over three tokens.
    toks = ["ĠcafÃ©", "Ġna", "Ã¯ve", "Ġæ", "Ŀ", "±", "äº", "¬", ".", "ĠâĢĶ"]
    assert texts_of(merge_words(toks)) == ["café", "naïve", "東京.", "—"]


def test_byte_level_double_newline_and_merged_newline_tokens():
    # "ĊĊ" is whitespace only; ".Ċ" ends with a newline, so the next token starts a word even
    # without a space marker.
    toks = ["Paris", ".Ċ", "So", "ĠĊĊ", "the", "Ġend"]
    assert merge_words(toks) == [
        WordSpan("Paris.", 0, 2),
        WordSpan("So", 2, 3),
        WordSpan("the", 4, 5),
        WordSpan("end", 5, 6),
    ]


def test_sentencepiece_markers_and_byte_fallback():
    toks = ["The", "▁Vel", "m", "ora", "▁in", "▁", "1", "8", ".", "\n\n",
            "So", "▁café", "<0x0A>", "Dr", "."]
    assert merge_words(toks) == [
        WordSpan("The", 0, 1),
        WordSpan("Velmora", 1, 4),
        WordSpan("in", 4, 5),
        WordSpan("18.", 6, 9),
        WordSpan("So", 10, 11),
        WordSpan("café", 11, 12),
        WordSpan("Dr.", 13, 15),
    ]


def test_sentencepiece_byte_fallback_multibyte():
    toks = ["▁", "<0xE6>", "<0x9D>", "<0xB1>", "▁x"]
    assert texts_of(merge_words(toks)) == ["東", "x"]


def test_plain_pieces_with_leading_spaces():
    toks = ["The", " Vel", "mora", " opened", "\n", "Its", " engineer", ","]
    assert texts_of(merge_words(toks)) == ["The", "Velmora", "opened", "Its", "engineer,"]


def test_first_token_starts_a_word_even_with_a_leading_marker():
    assert merge_words(["Ġbridge", "s"]) == [WordSpan("bridges", 0, 2)]
    assert merge_words(["▁bridge"]) == [WordSpan("bridge", 0, 1)]


def test_leading_whitespace_tokens_form_no_word():
    assert merge_words(["Ċ", "Ġ", "Hello"]) == [WordSpan("Hello", 2, 3)]
    assert merge_words(["Ċ", "ĊĊ"]) == []
    assert merge_words([]) == []


def test_texts_supply_the_word_text_but_not_the_boundaries():
    # Some tokenizers decode a lone "▁Vel" as "Vel" (no space); boundaries must still come from
    # the raw markers, while the text is the joined pieces.
    raw = ["The", "▁Vel", "m", "ora", "."]
    texts = ["The", "Vel", "m", "ora", "."]
    assert merge_words(raw, texts) == [WordSpan("The", 0, 1), WordSpan("Velmora.", 1, 5)]


def test_empty_text_pieces_do_not_start_or_split_words():
    # Special tokens decoded with skip_special_tokens come back as "" and must be ignored.
    raw = ["Paris", "<eos>"]
    assert merge_words(raw, ["Paris", ""]) == [WordSpan("Paris", 0, 1)]


def test_texts_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="texts has 1 pieces"):
        merge_words(["a", "Ġb"], ["a"])


def test_explicit_scheme_overrides_detection():
    # Without markers "café" is ambiguous; auto picks SentencePiece because Latin-1 0xE9 alone is
    # not valid UTF-8, and byte_level can be forced.
    assert merge_words(["café"])[0].text == "café"
    assert token_bytes(["Ã©"], scheme="byte_level") == ["é".encode()]


# --- the bundled tokenizers -------------------------------------------------------------------

SENTENCES = [
    "The Velmora bridge opened in 1887.\nIts engineer, Dr. Ansel Quist, was born in Harrowgate.",
    'So the answer is: "Quist\'s" (maybe) — 3.5 km; café naïve 東京.\n\nDone',
]


@pytest.fixture(scope="module", params=["smollm2", "gemma3-270m"])
def tokenizer(request):
    transformers = pytest.importorskip("transformers")
    from dynrag.errors import DynragError
    from dynrag.lm.bundled import ensure_converted, resolve_bundled

    try:
        path = ensure_converted(resolve_bundled(request.param), progress=False)
    except DynragError as exc:  # the weights package is not installed
        pytest.skip(str(exc))
    return transformers.AutoTokenizer.from_pretrained(path)


@pytest.mark.slow
@pytest.mark.parametrize("text", SENTENCES)
def test_bundled_tokenizer_words_match_whitespace_split(tokenizer, text):
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    raw = tokenizer.convert_ids_to_tokens(ids)
    words = merge_words(raw)
    # Punctuation attaches to the preceding word, so the words are exactly the whitespace split.
    assert texts_of(words) == text.split()
    # Decoded pieces give the same words (where no character is split across tokens).
    pieces = [tokenizer.decode([i]) for i in ids]
    if "\ufffd" not in "".join(pieces):
        assert texts_of(merge_words(raw, pieces)) == text.split()
    # Spans cover every non-whitespace token exactly once, in order.
    covered = [t for w in words for t in range(w.start, w.end)]
    assert covered == sorted(set(covered))
    skipped = set(range(len(raw))) - set(covered)
    assert all(tokenizer.decode([ids[t]]).strip() == "" for t in skipped)


@pytest.mark.slow
def test_bundled_tokenizer_generation_style_tokens(tokenizer):
    # A continuation usually starts with a spaced token; the first word must still start at 0.
    text = " Harrowgate is a town."
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    words = merge_words(tokenizer.convert_ids_to_tokens(ids))
    assert words[0].start == 0
    assert texts_of(words) == text.split()
