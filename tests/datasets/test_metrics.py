"""Metrics against hand-computed values."""

import pytest

from dynrag.datasets.metrics import best_token_scores, exact_match, normalize_answer, token_scores


def test_normalize_strips_case_punctuation_articles_space():
    assert normalize_answer("  The  Port of  Velmora, Inc.! ") == "port of velmora inc"
    assert normalize_answer("An apple a day") == "apple day"


def test_exact_match_over_aliases():
    assert exact_match("the Danube", ["Danube River", "danube"]) == 1.0
    assert exact_match("Danube river basin", ["Danube"]) == 0.0


def test_token_f1_hand_computed():
    # pred tokens: [tall, stone, bridge]; gold: [stone, bridge, over, river] -> overlap 2
    # precision 2/3, recall 2/4, f1 = 2*(2/3)*(1/2)/((2/3)+(1/2)) = (2/3)/(7/6) = 4/7
    s = token_scores("a tall stone bridge", "Stone bridge over the river")
    assert s.precision == pytest.approx(2 / 3)
    assert s.recall == pytest.approx(1 / 2)
    assert s.f1 == pytest.approx(4 / 7)


def test_yes_no_needs_exact_tokens():
    assert token_scores("yes it is", "yes").f1 == 0.0
    assert token_scores("Yes.", "yes").f1 == 1.0


def test_best_over_golds_keeps_matching_precision_recall():
    s = best_token_scores("Marie Curie", ["Curie", "Maria Sklodowska"])
    assert s.f1 == pytest.approx(2 / 3) and s.precision == pytest.approx(0.5) and s.recall == 1.0
    assert best_token_scores("x", []).f1 == 0.0


def test_coverage_is_a_gold_answer_as_whole_words_of_the_normalised_prediction():
    from dynrag.datasets.metrics import covers

    assert covers("It was built in Paris, France.", ["paris"]) == 1.0  # case and punctuation normalised
    assert covers("The answer is the Danube", ["Danube River", "the Danube"]) == 1.0  # any alias; article dropped
    assert covers("not at all", ["no"]) == 0.0  # whole words only
    assert covers("Lyon", ["Paris"]) == 0.0
    assert covers("anything", ["", "!"]) == 0.0  # a gold that normalises to nothing never counts
    assert covers("", ["paris"]) == 0.0


# ---- ranking quality, checked against values worked out by hand -----------------------------------


def test_ndcg_counts_each_gold_once_and_divides_by_the_ideal_ranking():
    from dynrag.datasets.metrics import ndcg_at_k

    # gold a at rank 2 and b at rank 3: (1/log2 3 + 1/log2 4) / (1 + 1/log2 3) = (0.63093 + 0.5) / 1.63093
    assert ndcg_at_k(["x", "a", "b", "a"], {"a", "b"}, 10) == pytest.approx(1.13093 / 1.63093, abs=1e-5)
    assert ndcg_at_k(["a", "b"], {"a", "b"}, 10) == pytest.approx(1.0)
    # k = 1 with two gold ids: the ideal is one gold at rank 1
    assert ndcg_at_k(["b", "a"], {"a", "b"}, 1) == pytest.approx(1.0)
    assert ndcg_at_k(["x", "y"], {"a"}, 2) == 0.0
    with pytest.raises(ValueError):
        ndcg_at_k(["a"], set(), 1)


def test_average_precision_charges_a_gold_id_never_found():
    from dynrag.datasets.metrics import average_precision

    # a at rank 1 (1/1), b at rank 3 (2/3): (1 + 0.6667) / 2
    assert average_precision(["a", "x", "b"], {"a", "b"}) == pytest.approx((1 + 2 / 3) / 2)
    # c never found: (1/2) / 2
    assert average_precision(["x", "a"], {"a", "c"}) == pytest.approx(0.25)
    assert average_precision(["a", "a"], {"a"}) == pytest.approx(1.0)
