"""SeaKR's eigen-score and decisions (methods/seakr/uncertainty.py, query.py) against values worked by hand."""

import math

import numpy as np
import pytest

from dynrag.methods.seakr.query import authors_step_query, masked_step_query
from dynrag.methods.seakr.uncertainty import (
    choose_strategy,
    eigen_score,
    floor_score,
    rank_by_uncertainty,
    sample_uncertainty,
    should_retrieve,
)


def test_two_identical_rows():
    # Z = [[1, -1], [1, -1]]: each row's mean over its 2 features is 0, so Z J_d = Z, and
    # Sigma = Z Z^T = [[2, 2], [2, 2]]. With alpha = 1: det([[3, 2], [2, 3]]) = 9 - 4 = 5, U = ln(5) / 2.
    assert eigen_score(np.array([[1.0, -1.0], [1.0, -1.0]]), alpha=1.0) == pytest.approx(math.log(5) / 2)


def test_centring_removes_each_rows_own_offset():
    # Z = [[2, 0], [0, 2]]: row means 1 and 1, so Z J_d = [[1, -1], [-1, 1]] and
    # Sigma = [[2, -2], [-2, 2]]. With alpha = 1: det([[3, -2], [-2, 3]]) = 9 - 4 = 5, U = ln(5) / 2;
    # uncentred, Z Z^T + I = [[5, 0], [0, 5]] would give ln(25) / 2 instead.
    assert eigen_score(np.array([[2.0, 0.0], [0.0, 2.0]]), alpha=1.0) == pytest.approx(math.log(5) / 2)


def test_three_rows_of_two_features():
    # Z = [[1, 0], [0, 1], [1, 1]]: centred rows [.5, -.5], [-.5, .5], [0, 0].
    # Sigma = [[.5, -.5, 0], [-.5, .5, 0], [0, 0, 0]]; + I: det = (1.5 * 1.5 - .5 * .5) * 1 = 2, U = ln(2) / 3.
    z = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert eigen_score(z, alpha=1.0) == pytest.approx(math.log(2) / 3)
    # A small alpha: det = (.5 + a)^2 (a) - (.25)(a) ... worked as eigenvalues: Sigma's are 1, 0, 0,
    # so det(Sigma + a I) = (1 + a) a^2 and U = (ln(1 + a) + 2 ln a) / 3.
    a = 1e-3
    assert eigen_score(z, alpha=a) == pytest.approx((math.log(1 + a) + 2 * math.log(a)) / 3)


def test_agreeing_samples_sit_at_the_floor_and_disagreeing_ones_above_it():
    # k = 4 copies of [1, -1] (centred squared norm 2): Sigma's eigenvalues are 8, 0, 0, 0,
    # so U = (ln(8 + a) + 3 ln a) / 4 with a = 1e-3: about -5.66.
    same = np.tile([1.0, -1.0], (4, 1))
    assert eigen_score(same) == pytest.approx((math.log(8.001) + 3 * math.log(1e-3)) / 4)
    assert eigen_score(same) == pytest.approx(floor_score(4, 1e-3, spread=2.0))
    spread = np.array([[1.0, -1.0, 0.0], [0.0, 1.0, -1.0], [-1.0, 0.0, 1.0], [1.0, 0.0, -1.0]])
    assert eigen_score(spread) > eigen_score(np.tile(spread[0], (4, 1)))


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="k x d"):
        eigen_score(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="alpha"):
        eigen_score(np.ones((2, 2)), alpha=0.0)


def test_blank_samples_are_left_out_and_none_left_means_unsure():
    states = np.array([[1.0, -1.0], [5.0, 7.0], [1.0, -1.0]])
    # The middle row's text is blank: U over rows 0 and 2, the first test's matrix.
    assert sample_uncertainty(["a", "  ", "b"], states, alpha=1.0) == pytest.approx(math.log(5) / 2)
    assert sample_uncertainty(["", " "], states[:2]) is None
    assert should_retrieve(None, -6.0)
    assert should_retrieve(-5.9, -6.0) and not should_retrieve(-6.0, -6.0) and not should_retrieve(-6.5, -6.0)


def test_reranking_puts_the_least_uncertain_first_and_blank_answers_last():
    assert rank_by_uncertainty([-5.0, -6.2, -6.0], [True, True, True]) == [1, 2, 0]
    assert rank_by_uncertainty([-5.0, -6.2, None], [True, False, True]) == [0, 1, 2]
    assert rank_by_uncertainty([-6.0, -6.0], [True, True]) == [0, 1]  # a tie keeps the retriever's order


def test_the_answer_strategy_is_chosen_by_uncertainty_unless_one_side_has_no_answer():
    assert choose_strategy(("Paris", -6.3), ("Lyon", -6.1)) == "rationales"
    assert choose_strategy(("Paris", -6.1), ("Lyon", -6.3)) == "documents"
    assert choose_strategy(("Paris", -6.2), ("Lyon", -6.2)) == "documents"
    assert choose_strategy((None, -9.0), ("Lyon", 0.0)) == "documents"
    assert choose_strategy(("it is unknown", -9.0), ("Lyon", 0.0)) == "documents"
    assert choose_strategy(("Paris", 0.0), ("", -9.0)) == "rationales"


def test_the_two_query_forms():
    pieces = [" The", " bridge", " was", " built", " by", " Eiffel", "."]
    raw = ["▁The", "▁bridge", "▁was", "▁built", "▁by", "▁Eiffel", "."]
    p = [0.95, 0.99, 0.97, 0.5, 0.96, 0.3, 0.99]
    logprobs = [math.log(x) for x in p]
    # paper: tokens with 1 - p above 0.1 (p < 0.9) left out
    assert masked_step_query(pieces, logprobs, 0.1, "Who built it?") == "The bridge was by."
    assert masked_step_query([" x"], [math.log(0.2)], 0.1, " Who  built it?") == "Who built it?"
    # reference: "built" is doubted but appears in the question; "Eiffel" is doubted and new;
    # stopwords and the answer words go
    assert authors_step_query(raw, pieces, logprobs, 0.1, "Who built the bridge?", "") == "bridge built"
    assert authors_step_query(raw, pieces, logprobs, 0.1, "Who made it?", "Eiffel was born") == "bridge Eiffel"
    # nothing left: the question's content words
    assert authors_step_query(["▁the"], [" the"], [math.log(0.2)], 0.1, "Who built the bridge?", "") == "built bridge"
