"""The llama.cpp backend's pure parts against hand-computed values."""

import math

import numpy as np

from dynrag.lm.llama_cpp import char_offsets, entropy_of, log_softmax


def test_log_softmax_of_equal_logits_is_uniform_and_survives_large_values():
    out = log_softmax(np.array([1000.0, 1000.0, 1000.0, 1000.0], dtype=np.float32))
    assert np.allclose(out, math.log(0.25))


def test_log_softmax_matches_hand_values():
    # p = e^[0, ln 3] / 4 = [0.25, 0.75]
    out = log_softmax(np.array([0.0, math.log(3.0)]))
    assert np.allclose(out, [math.log(0.25), math.log(0.75)])


def test_entropy_of_a_fair_coin_is_ln2_and_of_a_certain_outcome_zero():
    assert math.isclose(entropy_of(np.log([0.5, 0.5])), math.log(2))
    assert math.isclose(entropy_of(log_softmax(np.array([0.0, -2000.0]))), 0.0, abs_tol=1e-12)


def test_entropy_of_a_skewed_distribution():
    p = np.array([0.25, 0.75])
    assert math.isclose(entropy_of(np.log(p)), -(0.25 * math.log(0.25) + 0.75 * math.log(0.75)))


def test_char_offsets_follow_bytes_through_multibyte_characters_and_special_tokens():
    text = "<s>Zürich ok"
    pieces = [b"", b"<s>", b"Z", "ü".encode(), b"rich", b" ok"]
    assert char_offsets(pieces, text) == [(0, 0), (0, 3), (3, 4), (4, 5), (5, 9), (9, 12)]


def test_char_offsets_of_a_character_split_across_two_tokens():
    text = "aé"
    e_acute = "é".encode()
    spans = char_offsets([b"a", e_acute[:1], e_acute[1:]], text)
    assert spans[0] == (0, 1) and spans[-1][1] == 2
