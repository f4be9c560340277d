"""The report's pure parts: the Pareto front and the edge notes."""

from dynrag.methods.registry import METHODS
from dynrag.tune.report import best_row, edge_notes, pareto_front, tie_note
from dynrag.tune.space import parse_param


def row(number, value, also, state="complete"):
    return {"number": number, "state": state, "value": value, "also": also, "params": {}}


def test_the_front_keeps_trials_no_other_beats_on_both_figures():
    rows = [row(0, 0.30, 1.0), row(1, 0.35, 2.0), row(2, 0.25, 1.5), row(3, 0.35, 2.5), row(4, 0.9, 0.1, "pruned")]
    # EM up, retrievals down: 2 is beaten by 0, 3 by 1; the pruned trial is not on it
    assert pareto_front(rows, (True, False)) == [0, 1]
    assert pareto_front(rows, (True, True)) == [3]


def test_an_edge_note_for_a_best_value_at_either_end_only():
    dragin = METHODS.get("dragin").options
    theta = parse_param("theta=0.5:2.0:0.5", dragin, None, "dragin", None)
    words = parse_param("query_words=10,20,30", dragin, None, "dragin", None)
    variant = parse_param("variant=paper,reference", dragin, None, "dragin", None)
    best = {"params": {"theta": 2.0, "query_words": 20, "variant": "paper"}}
    notes = edge_notes(best, [theta, words, variant])
    assert notes == ["The best theta (2) is at the high end of the space (theta=0.5:2:0.5): the best value may lie "
                     "beyond it; widen the range to find out."]
    assert "low end" in edge_notes({"params": {"query_words": 10}}, [words])[0]


def test_the_best_among_equal_figures_is_the_cheaper_one_then_the_earliest():
    rows = [row(0, 0.15, 1.3), row(1, 0.10, 0.9), row(2, 0.15, 1.15), row(3, 0.15, 1.15), row(4, 0.2, 0.1, "pruned")]
    assert best_row(rows, True, False)["number"] == 2  # fewer retrievals wins the tie, then the earlier trial
    assert best_row(rows, True, None)["number"] == 0
    assert best_row([row(0, 0.5, 1.0, "pruned")], True, None) is None


def test_a_tie_note_only_when_every_trial_ran_in_full_to_the_same_figure():
    assert tie_note([row(0, 0.5, None), row(1, 0.5, None), row(2, 0.5, None)], "em").startswith(
        "All 3 trials tied at em 0.5: the ends of the range say nothing")
    assert tie_note([row(0, 0.5, None), row(1, 0.5, None)], "em").startswith("Both trials tied at em 0.5")
    assert tie_note([row(0, 0.5, None), row(1, 0.6, None)], "em") is None
    assert tie_note([row(0, 0.5, None), row(1, 0.5, None), row(2, 0.5, None, "pruned")], "em") is None
    assert tie_note([row(0, 0.5, None)], "em") is None  # one trial ties with nothing
