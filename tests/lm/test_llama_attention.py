"""Attention for llama.cpp decoding (lm/llama_attention.py): the stop callback is replayed at
every token of a block with exactly what transformers decoding would have shown it, and a callback
that fires mid-block cuts the generation there."""

import numpy as np

from dynrag.lm.base import Generation, Prompt
from dynrag.lm.llama_attention import BlockWatch, truncated
from dynrag.lm.stopping import DecodeState


class RowsByCount:
    """A follower double: token k's row is [k] (so a row names its token), counted as fed."""

    def __init__(self):
        self.rows: list[np.ndarray] = []
        self.passes = 0

    def extend(self, generated):
        new = list(generated[len(self.rows):])
        if new:
            self.passes += 1
        first = len(self.rows)
        self.rows.extend(np.array([float(first + i)]) for i in range(len(new)))
        return self.rows


def decode(watch, pieces):
    """Feed ``pieces`` one token at a time as a decoding loop would; the token count where it stopped."""
    state = DecodeState(3, [], [], [], [], [], [])
    for i, piece in enumerate(pieces):
        state.token_ids.append(100 + i)
        state.pieces.append(piece)
        state.raw_tokens.append(piece)
        state.logprobs.append(-0.1)
        state.entropies.append(0.5)
        if watch(state):
            return len(state.token_ids)
    return None


def test_the_callback_sees_every_token_with_the_rows_of_all_but_the_newest():
    seen = []
    follower = RowsByCount()
    watch = BlockWatch(follower, lambda s: seen.append((len(s.token_ids), [r[0] for r in s.attention_rows])) or False,
                       block=4)
    assert decode(watch, [" a", " b", " c", " d", " e", " f"]) is None
    # checked once a block of 4 was decoded: tokens 1..4 replayed, each with the rows before it
    assert seen == [(1, []), (2, [0.0]), (3, [0.0, 1.0]), (4, [0.0, 1.0, 2.0])]
    assert follower.passes == 1 and watch.checked == 4


def test_a_sentence_end_closes_the_block_early():
    seen = []
    watch = BlockWatch(RowsByCount(), lambda s: seen.append(len(s.token_ids)) or False, block=8)
    decode(watch, [" It", " rained", ".", " Then"])
    assert seen == [1, 2, 3]


def test_a_callback_firing_mid_block_is_found_at_its_token():
    watch = BlockWatch(RowsByCount(), lambda s: len(s.token_ids) == 2, block=4)
    stopped_at = decode(watch, [" a", " b", " c", " d", " e"])
    assert stopped_at == 4  # decoding ran to the block's end ...
    assert watch.fired_at == 2  # ... and the callback fired at the second token


def test_replay_after_decoding_ended_covers_the_last_partial_block():
    seen = []
    watch = BlockWatch(RowsByCount(), lambda s: seen.append(len(s.token_ids)) or False, block=8)
    state = DecodeState(3, [1, 2, 3], [" a", " b", " c"], [0.0] * 3, [0.0] * 3, [], [" a", " b", " c"])
    assert decode(watch, [" a", " b", " c"]) is None and seen == []
    assert watch.replay(state, 3) is False and seen == [1, 2, 3]
    assert watch.replay(state, 3) is False and seen == [1, 2, 3]  # nothing replayed twice


def test_truncated_keeps_the_first_tokens_and_says_the_callback_ended_it():
    gen = Generation(Prompt.of("p"), [1], [(0, 1)], ["p"], [5, 6, 7], [" a", " b", " c"], [" a", " b", " c"],
                     np.array([-0.1, -0.2, -0.3]), np.array([1.0, 2.0, 3.0]), None, "length", 3)
    cut = truncated(gen, 2)
    assert cut.token_ids == [5, 6] and cut.text == " a b" and cut.stop_reason == "callback"
    assert list(cut.entropies) == [1.0, 2.0] and cut.decoded_tokens == 3
