"""ETC's formulas against values worked out by hand (pure functions, no model)."""

import numpy as np
import pytest

from dynrag.methods.etc.trend import (
    attention_focus,
    entropy_trend,
    first_differences,
    per_sentence,
    second_differences,
    smooth,
    trend_trigger,
    word_max,
)
from dynrag.text.words import WordSpan

ALL = [True] * 5


def test_differences_and_smoothing_of_a_sequence_of_content_words():
    h = np.array([1.0, 2.0, 1.5, 3.0, 3.5])
    # d1: 0 for the first word, then each entropy minus the one before:
    #     2-1 = 1, 1.5-2 = -0.5, 3-1.5 = 1.5, 3.5-3 = 0.5
    assert first_differences(h, ALL) == pytest.approx([0, 1.0, -0.5, 1.5, 0.5])
    # d2 from word 2 on, each d1 minus the latest nonzero d1 before it (from word 1 on):
    #     -0.5-1 = -1.5, 1.5-(-0.5) = 2, 0.5-1.5 = -1
    trend = entropy_trend(h, ALL)
    assert trend.d2 == pytest.approx([0, 0, -1.5, 2.0, -1.0])
    # smoothing, p = previous d2 (0 before the first), E = running mean of the d2 so far:
    #   word 2: E = -1.5, w = |0+1.5| / (0 + 1.5) = 1, a = 1        -> m = -1.5
    #   word 3: E = 0.25, w = 1.75 / (1.75 + 1.75) = 0.5, a = 0.95 -> m = 0.95*2 + 0.05*(-1.5) = 1.825
    #   word 4: E = -1/6, w = (13/6) / (5/6 + 13/6) = 13/18, a = 0.9 + 0.1*13/18
    #           -> m = -a + (1-a)*2 = -0.97222 + 0.05556 = -0.91667
    assert trend.smoothed == pytest.approx([0, 0, -1.5, 1.825, -0.9166667], abs=1e-6)
    assert trend_trigger(trend.smoothed, 1.0) == 3
    assert trend_trigger(trend.smoothed, 1.2, absolute=True) == 2  # |-1.5| > 1.2 comes first
    assert trend_trigger(trend.smoothed, 1.9) is None


def test_function_words_are_skipped_by_both_differences():
    h = np.array([0.5, 9.0, 1.0, 2.0, 9.0, 4.0])
    content = [True, False, True, True, False, True]
    # d1 over the content words 0, 2, 3, 5: 1-0.5 = 0.5, 2-1 = 1, 4-2 = 2 (the 9s never count)
    d1 = first_differences(h, content)
    assert d1 == pytest.approx([0, 0, 0.5, 1.0, 0, 2.0])
    # d2: word 2 has no nonzero d1 before it (0); word 3: 1-0.5 = 0.5; word 5: 2-1 = 1
    d2 = second_differences(d1, content)
    assert d2 == pytest.approx([0, 0, 0, 0.5, 0, 1.0])
    # word 3: E = 0.5, w = 1, m = 0.5; word 5: E = 0.75, w = 0.25 / (0.25 + 0.25) = 0.5,
    # a = 0.95, m = 0.95*1 + 0.05*0.5 = 0.975
    assert smooth(d2) == pytest.approx([0, 0, 0, 0.5, 0, 0.975])


def test_a_flat_step_hides_the_difference_before_it_and_equal_values_smooth_to_themselves():
    # d1 = [0, 0, 1]: the second difference of word 2 needs a nonzero d1 at word 1 or later before it
    assert entropy_trend([1.0, 1.0, 2.0], [True] * 3).d2 == pytest.approx([0, 0, 0])
    # Both distances 0 (current = previous = mean): any weight gives the value itself, not 0/0
    assert smooth([0, 0, 1.0, 1.0]) == pytest.approx([0, 0, 1.0, 1.0])


def test_word_entropy_attention_focus_and_sentence_scaling():
    # a word's entropy is its largest token's: [0.1, 0.5] -> 0.5, [0.3, 0.2] -> 0.3
    assert word_max([0.1, 0.5, 0.3, 0.2], [WordSpan("a", 0, 2), WordSpan("b", 2, 4)]) == pytest.approx([0.5, 0.3])
    # each word's largest attention to a word up to itself (the row max; later columns ignored)
    w = np.array([[1.0, 0.9, 0.9], [0.2, 0.7, 0.9], [0.5, 0.1, 0.3]])
    assert attention_focus(w) == pytest.approx([1.0, 0.7, 0.5])
    # sentence 0: [1, 3] sums to 4 over 2 words -> [0.5, 1.5]; sentence 1: [2, 2, 4] sums 8 over 3 -> [.75, .75, 1.5]
    assert per_sentence([1, 3, 2, 2, 4], [0, 0, 1, 1, 1]) == pytest.approx([0.5, 1.5, 0.75, 0.75, 1.5])


def test_shapes_are_checked_and_ineligible_units_never_trigger():
    with pytest.raises(ValueError, match="one length"):
        first_differences([1.0, 2.0], [True])
    assert trend_trigger([5.0, -np.inf, 5.0], 1.0) == 0
    assert trend_trigger([-np.inf, -5.0], 1.0, absolute=True) == 1
    assert entropy_trend([], []).smoothed.shape == (0,)
