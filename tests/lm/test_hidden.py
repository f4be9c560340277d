"""The pieces of SeaKR's sampling both backends share, against hand-worked values: the candidates a
draw picks among, and where a sampled row ends and what is fed after it."""

import numpy as np
import pytest
import torch

from dynrag.lm.hidden import SampledRows, candidates, draw_tokens, feed_token


def test_candidates_are_cut_to_top_k_then_to_the_nucleus():
    # softmax over the top 3 of [2, 1, 0, -1]: e^2, e^1, e^0 over 11.107 = 0.6652, 0.2447, 0.0900;
    # mass before each: 0, 0.6652, 0.9099, so top_p 0.8 keeps two, renormalised: 0.7311, 0.2689.
    probs, ids = candidates(torch.tensor([[2.0, 1.0, 0.0, -1.0]]), 1.0, 3, 0.8)
    assert ids.tolist() == [[0, 1, 2]]
    assert probs[0].tolist() == pytest.approx([0.7311, 0.2689, 0.0], abs=1e-4)
    # temperature 2 halves the logits: the top 3 of [1, 0.5, 0] give 0.5065, 0.3072, 0.1863
    probs, ids = candidates(torch.tensor([[0.0, 2.0, 1.0, -1.0]]), 2.0, 3, 1.0)
    assert ids.tolist() == [[1, 2, 0]]
    assert probs[0].tolist() == pytest.approx([0.5065, 0.3072, 0.1863], abs=1e-4)
    probs, ids = candidates(torch.tensor([[0.0, 1.0]]), 1.0, 0, 1.0)  # top_k 0: the whole vocabulary
    assert ids.tolist() == [[1, 0]] and probs[0].tolist() == pytest.approx([0.7311, 0.2689], abs=1e-4)
    probs, _ = candidates(torch.tensor([[5.0, 0.0, 0.0]]), 1.0, 0, 0.5)  # the most likely always stays
    assert probs[0].tolist() == [1.0, 0.0, 0.0]


def test_draws_keep_to_the_candidates_and_temperature_zero_is_the_argmax():
    logits = torch.tensor([[0.0, 3.0, 2.9, -5.0]] * 200)
    generator = torch.Generator().manual_seed(0)
    drawn = draw_tokens(logits, 1.0, 2, 1.0, generator)
    assert set(drawn.tolist()) == {1, 2}
    assert draw_tokens(logits[:2], 0, 2, 1.0, generator).tolist() == [1, 1]


def spell(ids):
    return "".join(chr(ord("a") + i) for i in ids)


def test_a_row_ends_at_eos_a_stop_string_or_the_limit_and_is_fed_eos_there():
    ends = {9}.__contains__
    rows = SampledRows(3, ends, 9, 3, ("c",), spell)
    # row 0 writes "a", row 1 ends at once, row 2 writes "c", a stop: its token is dropped
    assert rows.step([0, 9, 2]) == ([0, 9, 9], [1, 2])
    rows.finish(1, np.ones(2)), rows.finish(2, np.full(2, 2.0))
    assert rows.live() == [0]
    assert rows.step([1, 5, 5]) == ([1, 9, 9], [])  # finished rows are fed EOS and not read
    assert rows.step([3, 0, 0]) == ([9, 9, 9], [0])  # "abd" reaches the limit of 3: "d" gives way to EOS
    rows.finish(0, np.zeros(2))
    out = rows.samples()
    assert out.texts == ["abd", "", ""] and out.token_ids == [[0, 1], [], []]
    assert out.states.tolist() == [[0, 0], [1, 1], [2, 2]] and out.states.dtype == np.float32


def test_the_fed_eos_is_the_tokenizers_own_when_it_ends_a_turn():
    assert feed_token({5, 7}, 7) == 7
    assert feed_token({5, 7}, 2) == 5
    assert feed_token({5, 7}, None) == 5
