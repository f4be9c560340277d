"""DRAGIN scoring (RIND, QFS, token->word reductions) against values computed by hand."""

import numpy as np
import pytest

from dynrag.methods.dragin.scoring import (
    first_trigger,
    qfs_select,
    reference_attention_weights,
    reference_qfs_weights,
    reference_scores,
    reference_token_weights,
    reference_trigger,
    reference_word_weights,
    rind_scores,
    settled_trigger,
    word_attention,
    word_entropy,
)
from dynrag.text.words import WordSpan


def spans(*ranges):
    return [WordSpan(f"w{k}", s, e) for k, (s, e) in enumerate(ranges)]


# --- paper variant --------------------------------------------------------------------------------

H = [1.0, 2.0, 0.5, 0.3]
# W[j, i] = attention word j pays to word i. The diagonal (0.9, 0.4, 0.3, 0.2) must be ignored.
W = [
    [0.9, 0.0, 0.0, 0.0],
    [0.6, 0.4, 0.0, 0.0],
    [0.2, 0.5, 0.3, 0.0],
    [0.1, 0.3, 0.4, 0.2],
]
CONTENT = [True, False, True, True]
# a_max(0) = max(0.6, 0.2, 0.1) = 0.6  -> S0 = 1.0 * 0.6 * 1 = 0.6
# a_max(1) = max(0.5, 0.3)      = 0.5  -> S1 = 2.0 * 0.5 * 0 = 0.0  (not a content word)
# a_max(2) = 0.4                       -> S2 = 0.5 * 0.4 * 1 = 0.2
# word 3 has no later word             -> S3 = 0.0
EXPECTED_S = [0.6, 0.0, 0.2, 0.0]


def test_rind_scores_by_hand():
    np.testing.assert_allclose(rind_scores(H, W, CONTENT), EXPECTED_S)


def test_rind_ignores_the_upper_triangle():
    noisy = np.array(W) + np.triu(np.full((4, 4), 5.0), k=1)
    np.testing.assert_allclose(rind_scores(H, noisy, CONTENT), EXPECTED_S)


def test_rind_empty_and_single_word():
    assert rind_scores([], np.zeros((0, 0)), []).shape == (0,)
    assert rind_scores([], [], []).shape == (0,)
    np.testing.assert_allclose(rind_scores([3.0], [[1.0]], [True]), [0.0])


def test_rind_shape_errors_name_the_input():
    with pytest.raises(ValueError, match="attention"):
        rind_scores(H, np.zeros((3, 3)), CONTENT)
    with pytest.raises(ValueError, match="content"):
        rind_scores(H, W, [True, False])
    with pytest.raises(ValueError, match="entropy"):
        rind_scores(np.zeros((2, 2)), W, CONTENT)


def test_first_trigger_is_strictly_greater():
    assert first_trigger(EXPECTED_S, 0.1) == 0
    assert first_trigger(EXPECTED_S, 0.6) is None  # 0.6 is not > 0.6
    assert first_trigger([0.1, 0.2, 0.3], 0.15) == 1
    assert first_trigger([], 0.0) is None
    assert isinstance(first_trigger([1.0], 0.0), int)


def test_a_trigger_is_settled_once_no_earlier_word_can_still_cross():
    # EXPECTED_S with theta 0.5: word 0 crosses (0.6); nothing comes before it, so it is final.
    assert settled_trigger(EXPECTED_S, H, CONTENT, 0.5, complete=4) == 0
    # theta 0.1: word 0 crosses first again.
    assert settled_trigger(EXPECTED_S, H, CONTENT, 0.1, complete=4) == 0
    # Word 2 is the first over 0.15 when word 0 is held back (-inf: may not trigger).
    scores = [-np.inf, 0.0, 0.2, 0.0]
    # Word 1 (H 2.0) is no content word (its score stays 0), so word 2 is settled.
    assert settled_trigger(scores, H, CONTENT, 0.15, complete=4) == 2
    # Made a content word, word 1 could reach 2.0 * 1 > 0.15 with more text: not settled.
    assert settled_trigger(scores, H, [True, True, True, True], 0.15, complete=4) is None
    # A content word before it whose entropy is at most theta can never cross: settled.
    assert settled_trigger([0.1, 0.0, 0.2, 0.0], [0.15, 0.0, 0.5, 0.3], [True] * 4, 0.15, complete=4) == 2
    assert settled_trigger([0.1, 0.0, 0.2, 0.0], [0.16, 0.0, 0.5, 0.3], [True] * 4, 0.15, complete=4) is None
    # Only complete words count: word 2 may still grow.
    assert settled_trigger(scores, H, CONTENT, 0.15, complete=2) is None
    assert settled_trigger([], [], [], 0.1, complete=0) is None
    with pytest.raises(ValueError, match="one entry per word"):
        settled_trigger([0.1], [0.1, 0.2], [True], 0.1, complete=1)


def test_word_entropy_is_the_mean_over_tokens():
    # words [0,2) [2,3) [3,5): (0.4+0.8)/2 = 0.6, 1.5, (0.2+0.6)/2 = 0.4
    h = word_entropy([0.4, 0.8, 1.5, 0.2, 0.6], spans((0, 2), (2, 3), (3, 5)))
    np.testing.assert_allclose(h, [0.6, 1.5, 0.4])


# Token matrix A[t, s] over 5 generated tokens; words w0 = tokens 0-1, w1 = token 2, w2 = tokens 3-4.
A = [
    [1.00, 0.00, 0.00, 0.00, 0.00],
    [0.50, 0.50, 0.00, 0.00, 0.00],
    [0.20, 0.30, 0.50, 0.00, 0.00],
    [0.10, 0.20, 0.30, 0.40, 0.00],
    [0.05, 0.15, 0.40, 0.10, 0.30],
]
SPANS = spans((0, 2), (2, 3), (3, 5))
# Column sums per word, one value per token row t = 0..4:
#   w0 (cols 0+1): 1.0, 1.0, 0.5, 0.3, 0.2
#   w1 (col 2):    0.0, 0.0, 0.5, 0.3, 0.4
#   w2 (cols 3+4): 0.0, 0.0, 0.0, 0.4, 0.4
# W[j, i] = max of those over the rows of word j:
#   j=w0 (rows 0,1): [1.0, 0.0, 0.0]
#   j=w1 (row 2):    [0.5, 0.5, 0.0]
#   j=w2 (rows 3,4): [max(0.3, 0.2), max(0.3, 0.4), max(0.4, 0.4)] = [0.3, 0.4, 0.4]
EXPECTED_W = [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.3, 0.4, 0.4]]


def test_word_attention_by_hand():
    np.testing.assert_allclose(word_attention(A, SPANS), EXPECTED_W)


def test_paper_pipeline_tokens_to_scores():
    # H per word = [0.6, 1.5, 0.4] (see test_word_entropy_is_the_mean_over_tokens); all content.
    # a_max(w0) = max(W[1,0], W[2,0]) = max(0.5, 0.3) = 0.5 -> 0.6 * 0.5 = 0.3
    # a_max(w1) = W[2,1] = 0.4                              -> 1.5 * 0.4 = 0.6
    # w2 is last                                            -> 0
    h = word_entropy([0.4, 0.8, 1.5, 0.2, 0.6], SPANS)
    scores = rind_scores(h, word_attention(A, SPANS), [True, True, True])
    np.testing.assert_allclose(scores, [0.3, 0.6, 0.0])
    assert first_trigger(scores, 0.5) == 1


def test_word_attention_skips_tokens_outside_words():
    # Token 1 is a newline (no word). Words: w0 = token 0, w1 = token 2.
    # W[1, 0] = A[2, 0] = 0.2 (the newline's own column 0.3 and row are ignored).
    a = [[1.0, 0.0, 0.0], [0.6, 0.4, 0.0], [0.2, 0.3, 0.5]]
    np.testing.assert_allclose(word_attention(a, spans((0, 1), (2, 3))), [[1.0, 0.0], [0.2, 0.5]])


def test_word_level_shape_errors():
    with pytest.raises(ValueError, match="square"):
        word_attention(np.zeros((3, 4)), spans((0, 1)))
    with pytest.raises(ValueError, match="outside"):
        word_attention(np.zeros((3, 3)), spans((2, 4)))
    with pytest.raises(ValueError, match="empty"):
        word_entropy([1.0, 2.0], spans((1, 1)))
    assert word_attention(np.zeros((2, 2)), []).shape == (0, 0)


# --- reference variant ----------------------------------------------------------------------------


def test_reference_token_weights_max_over_rows_then_mean_over_heads():
    heads = [
        # head 0: column maxima [1.0, 0.4, 0.5]
        [[1.0, 0.0, 0.0], [0.6, 0.4, 0.0], [0.2, 0.3, 0.5]],
        # head 1: column maxima [1.0, 0.8, 0.8]
        [[1.0, 0.0, 0.0], [0.2, 0.8, 0.0], [0.1, 0.1, 0.8]],
    ]
    # mean over heads: [1.0, 0.6, 0.65]
    np.testing.assert_allclose(reference_token_weights(heads), [1.0, 0.6, 0.65])
    np.testing.assert_allclose(reference_token_weights(heads[0]), [1.0, 0.4, 0.5])
    with pytest.raises(ValueError, match="heads"):
        reference_token_weights(np.zeros((2, 3, 4)))


def test_reference_attention_weights_by_hand():
    # One sentence of three words over tokens 1-4; tokens 0 and 5 belong to other sentences.
    # u = [0.3 + 0.2, 0.4, 0.5] = [0.5, 0.4, 0.5], sum 1.4, three words:
    # a = [0.5/1.4*3, 0.4/1.4*3, 0.5/1.4*3] = [15/14, 12/14, 15/14]
    token_weights = [0.1, 0.3, 0.2, 0.4, 0.5, 9.0]
    weights = reference_attention_weights(token_weights, spans((1, 3), (3, 4), (4, 5)))
    np.testing.assert_allclose(weights, [15 / 14, 12 / 14, 15 / 14])
    assert weights.sum() == pytest.approx(3.0)
    # S = H * a * s with H = [2.0, 1.0, 0.5], s = [T, T, F]:
    # [2 * 15/14, 1 * 12/14, 0] = [30/14, 12/14, 0]
    scores = reference_scores([2.0, 1.0, 0.5], weights, [True, True, False])
    np.testing.assert_allclose(scores, [30 / 14, 12 / 14, 0.0])
    assert first_trigger(scores, 1.0) == 0


def test_reference_edge_cases():
    assert reference_attention_weights([0.5], []).shape == (0,)
    np.testing.assert_allclose(reference_attention_weights([0.0, 0.0], spans((0, 1), (1, 2))), [0.0, 0.0])
    with pytest.raises(ValueError, match="one entry per word"):
        reference_scores([1.0, 2.0], [1.0], [True, True])


def test_reference_token_weights_take_later_sentences_rows():
    # Key 0's largest attention comes from row 3, in the next sentence: the whole-chunk maximum
    # sees it (0.7), a pass cut at the end of key 0's sentence (rows 0-1) would not (... 0.6).
    a = [[1.0, 0.0, 0.0, 0.0], [0.6, 0.4, 0.0, 0.0], [0.1, 0.1, 0.8, 0.0], [0.7, 0.1, 0.1, 0.1]]
    np.testing.assert_allclose(reference_token_weights(a), [1.0, 0.4, 0.8, 0.1])
    np.testing.assert_allclose(reference_token_weights(np.array(a)[1:, 1:]), [0.4, 0.8, 0.1])


def test_reference_word_weights_normalise_per_sentence():
    # sentence 0: [0.2, 0.3, 0.5] / 1.0 * 3 = [0.6, 0.9, 1.5]; sentence 1: [0.1, 0.4] / 0.5 * 2 = [0.4, 1.6]
    weights = reference_word_weights([0.2, 0.3, 0.5, 0.1, 0.4], spans((0, 1), (1, 2), (2, 3), (3, 4), (4, 5)),
                                     [0, 0, 0, 1, 1])
    np.testing.assert_allclose(weights, [0.6, 0.9, 1.5, 0.4, 1.6])
    with pytest.raises(ValueError, match="sentence"):
        reference_word_weights([0.2], spans((0, 1)), [0, 0])


def test_reference_trigger_takes_the_first_sentence_and_all_its_hits():
    scores = [0.1, 1.5, 0.2, 2.0, 3.0, 0.0]
    sentence = [0, 0, 0, 0, 1, 1]
    s, hits = reference_trigger(scores, sentence, 1.0)
    assert s == 0 and hits.tolist() == [1, 3]
    assert reference_trigger(scores, sentence, 5.0) is None


# The QFS pass: position 0 is BOS (in no word); word 0 = token 1, word 1 = tokens 2-3.
QFS_ATTENTION = [[1.0, 0.0, 0.0, 0.0], [0.6, 0.4, 0.0, 0.0], [0.5, 0.2, 0.3, 0.0], [0.1, 0.2, 0.3, 0.4]]


def test_reference_qfs_weights_by_hand():
    words = spans((1, 2), (2, 4))
    # hit word 1 (r0 = 2): token 2 reads row 1 over [0, 2): [0.6, 0.4]; token 3 reads row 2 over
    # [0, 2): [0.5, 0.2] / 0.7. Mean over the two tokens: [(0.6 + 5/7) / 2, (0.4 + 2/7) / 2].
    # Word 0 is token 1: (0.4 + 2/7) / 2 = 4.8/14; the hit word itself gets nothing; BOS is in no word.
    np.testing.assert_allclose(reference_qfs_weights(QFS_ATTENTION, words, [1]), [4.8 / 14, 0.0])
    # hit word 0 too (r0 = 1): row 0 over [0, 1) = [1.0], all on BOS. Mean over the two hits halves word 0.
    np.testing.assert_allclose(reference_qfs_weights(QFS_ATTENTION, words, [0, 1]), [2.4 / 14, 0.0])
    np.testing.assert_allclose(reference_qfs_weights(QFS_ATTENTION, words, []), [0.0, 0.0])
    with pytest.raises(ValueError, match="hit 2"):
        reference_qfs_weights(QFS_ATTENTION, words, [2])


# --- QFS ------------------------------------------------------------------------------------------

WORDS = ["a", "b", "c", "d", "e", "f"]
WEIGHTS = [0.5, 0.9, 0.5, 0.1, 0.9, 0.5]
QFS_CONTENT = [True, False, True, True, True, True]
# Content candidates (index: weight): 0: 0.5, 2: 0.5, 3: 0.1, 4: 0.9, 5: 0.5. "b" has weight 0.9 but
# is not content. Descending, earlier first on ties: 4, 0, 2, 5, 3.


def test_qfs_top_n_in_original_order():
    # top 3 = {4, 0, 2} -> text order 0, 2, 4; "f" (index 5) loses the 0.5 tie to the earlier words
    assert qfs_select(WEIGHTS, WORDS, QFS_CONTENT, 3) == ["a", "c", "e"]
    assert qfs_select(WEIGHTS, WORDS, QFS_CONTENT, 1) == ["e"]
    # top 2 = {4, 0}: the tie between 0, 2 and 5 goes to 0
    assert qfs_select(WEIGHTS, WORDS, QFS_CONTENT, 2) == ["a", "e"]


def test_qfs_n_at_least_the_content_words_returns_all_in_order():
    assert qfs_select(WEIGHTS, WORDS, QFS_CONTENT, 5) == ["a", "c", "d", "e", "f"]
    assert qfs_select(WEIGHTS, WORDS, QFS_CONTENT, 100) == ["a", "c", "d", "e", "f"]
    assert qfs_select(WEIGHTS, WORDS, QFS_CONTENT, 0) == []
    assert qfs_select([], [], [], 3) == []


def test_qfs_errors():
    with pytest.raises(ValueError, match="same length"):
        qfs_select(WEIGHTS, WORDS[:5], QFS_CONTENT, 2)
    with pytest.raises(ValueError, match="n must be"):
        qfs_select(WEIGHTS, WORDS, QFS_CONTENT, -1)
