"""The binary tree search: queue order, the two children's costs, limits, correctness (fast)."""

import pytest

from dynrag.errors import ConfigError
from dynrag.deeprag.search import Match, Node, SearchLimits, children, exhaustive_nodes, tree_search
from dynrag.methods.deeprag.narrative import NarrativeStep
from tests.fakes import ScriptedTree


def test_parametric_child_keeps_the_cost_and_the_retrieving_child_adds_one():
    parent = Node(retrievals=2, steps=3, seq=7, history=(NarrativeStep("a", True, "x"),) * 3)
    parametric, retrieving = children(parent, parent.history, "next?", seq=11)
    assert (parametric.retrievals, parametric.steps) == (2, 4) and parametric.pending.retrieve is False
    assert (retrieving.retrievals, retrieving.steps) == (3, 4) and retrieving.pending.retrieve is True
    assert parametric.pending.subquery == retrieving.pending.subquery == "next?"
    assert parametric < retrieving


def test_queue_takes_fewest_retrievals_then_fewest_steps_then_first_in():
    assert Node(0, 5, 9, ()) < Node(1, 1, 0, ())  # retrievals first
    assert Node(1, 1, 9, ()) < Node(1, 2, 0, ())  # then steps
    assert Node(1, 2, 3, ()) < Node(1, 2, 4, ())  # then insertion order

    tree = ScriptedTree(correct_path=(False, True))
    result = tree_search(tree, SearchLimits(max_steps=4, max_nodes=50))
    # root; P; PP (final, wrong); R (1 retrieval, 1 step) before PR (1 retrieval, 2 steps); PR (final, right)
    assert result.order == [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2)]
    assert tree.finals == [(False, False), (False, True)]
    assert result.status == "found" and result.retrievals == 1
    assert [(s.subquery, s.retrieve, s.answer) for s in result.steps] == [
        ("q1", False, "from memory"), ("q2", True, "from passages")]
    assert result.final_answer == "right"
    assert result.tree_counts() == {"expanded": 5, "pushed": 7, "terminals": 2, "queued": 2}


def test_the_first_correct_narrative_found_has_the_fewest_retrievals():
    for path in [(False, False), (True, False), (False, True), (True, True)]:
        result = tree_search(ScriptedTree(correct_path=path), SearchLimits(max_steps=4, max_nodes=50))
        assert result.status == "found" and tuple(s.retrieve for s in result.steps) == path
        # every narrative checked before it retrieved no more than it
        assert all(r <= sum(path) for r, _ in result.order)


def test_children_are_answered_only_when_taken_from_the_queue():
    tree = ScriptedTree(correct_path=(False, False))
    result = tree_search(tree, SearchLimits(max_steps=4, max_nodes=50))
    assert result.status == "found"
    # taken: root (no answer), P, PP; the retrieving children R and PR were never answered
    assert tree.answered == [((), False), ((False,), False)]


def test_node_limit_and_exhaustion():
    never = ScriptedTree(correct_path=("unreachable",))
    limited = tree_search(never, SearchLimits(max_steps=4, max_nodes=3))
    assert limited.status == "node_limit" and limited.expanded == 3 and limited.steps is None
    short = tree_search(ScriptedTree(correct_path=("unreachable",)), SearchLimits(max_steps=1, max_nodes=50))
    # T = 1: one sub-question, then the final answer on both children
    assert short.status == "exhausted" and short.expanded == 3 and short.terminals == 2 and short.queued == 0
    assert short.wrong == ["wrong", "wrong"]  # each terminal's answer, kept to say why nothing was found
    found = tree_search(ScriptedTree(correct_path=(False, True)), SearchLimits(max_steps=4, max_nodes=50))
    assert found.status == "found" and found.wrong == ["wrong"]  # (P, P) was written and judged first
    with pytest.raises(ConfigError):
        SearchLimits(max_steps=0)


FOUR = ("q1", "q2", "q3", "q4")


def test_the_default_budget_is_the_whole_tree_and_finds_a_path_retrieving_at_every_step():
    assert exhaustive_nodes(1) == 3 and exhaustive_nodes(4) == 31
    assert SearchLimits(max_steps=4).max_nodes == 31 and SearchLimits(max_steps=2).max_nodes == 7
    assert SearchLimits(max_steps=4).exhaustive and not SearchLimits(max_steps=4, max_nodes=24).exhaustive
    tree = ScriptedTree(correct_path=(True,) * 4, subqueries=FOUR)
    result = tree_search(tree, SearchLimits(max_steps=4))  # no budget given
    assert result.status == "found" and [s.retrieve for s in result.steps] == [True] * 4
    assert result.expanded == 31 and result.queued == 0  # the last node of the tree
    assert len(tree.finals) == 16  # every narrative of four sub-questions was checked


def test_a_smaller_budget_says_at_which_retrieval_count_it_cut():
    # T = 4 has 5, 10, 10, 5, 1 nodes with 0..4 retrievals; the old default of 24 nodes runs out
    # among the 2-retrieval ones, so a narrative that needs 3 is never reached
    cut = tree_search(ScriptedTree(correct_path=(True, True, True, False), subqueries=FOUR),
                      SearchLimits(max_steps=4, max_nodes=24))
    assert cut.status == "node_limit" and cut.cut_at == 2 and cut.steps is None
    assert max(r for r, _ in cut.order) == 2
    # 8 nodes on 4 hops: not even every 1-retrieval narrative is tried
    tiny = tree_search(ScriptedTree(correct_path=(False, False, False, True), subqueries=FOUR),
                       SearchLimits(max_steps=4, max_nodes=8))
    assert tiny.status == "node_limit" and tiny.cut_at == 1
    found = tree_search(ScriptedTree(correct_path=(False, False, False, True), subqueries=FOUR), SearchLimits(max_steps=4))
    assert found.status == "found" and found.cut_at is None and found.retrievals == 1


def test_max_steps_counts_subquestions_not_retrievals():
    tree = ScriptedTree(correct_path=(True, True, True), subqueries=("q1", "q2", "q3", "q4"))
    result = tree_search(tree, SearchLimits(max_steps=3, max_nodes=100))
    assert result.status == "found" and len(result.steps) == 3
    assert max(len(p) for p in tree.finals) == 3


def test_max_retrievals_prunes_the_retrieving_children_and_the_whole_tree_counts_it():
    # T = 4, R = 2: narratives with 0, 1 or 2 retrievals at each depth d: 1, 2, 4, 7, 11 -> 25
    assert exhaustive_nodes(4, 2) == 25 and exhaustive_nodes(4, 4) == exhaustive_nodes(4) == 31
    assert exhaustive_nodes(3, 0) == 4  # the parametric chain alone
    limits = SearchLimits(max_steps=4, max_retrievals=2)
    assert limits.max_nodes == 25 and limits.exhaustive
    needs_three = tree_search(ScriptedTree(correct_path=(True, True, True, False), subqueries=FOUR), limits)
    assert needs_three.status == "exhausted" and needs_three.expanded == 25
    assert max(r for r, _ in needs_three.order) == 2
    two = tree_search(ScriptedTree(correct_path=(True, False, True, False), subqueries=FOUR), limits)
    assert two.status == "found" and two.retrievals == 2


def test_match_is_normalised_exact_match_or_an_f1_threshold():
    em = Match.parse("em")
    assert em.correct("The Danube.", ["Danube"]) and em.correct("Danube river", ["the Danube", "Danube River"])
    assert not em.correct("the Danube river delta", ["Danube"])  # containment is not a match
    assert not em.correct("Danube", ["the Danube river delta"])
    assert not em.correct("", ["the"]) and not em.correct("  ", [""])  # empty never matches
    assert em.correct("Yes, it was.", ["yes"], yes_no_dataset=True)
    assert not em.correct("Yes, it was.", ["yes"])
    f1 = Match.parse("f1:0.7")
    assert f1.kind == "f1" and f1.threshold == 0.7 and str(f1) == "f1:0.7"
    # precision 1/2, recall 1: F1 2/3
    assert not f1.correct("Danube river", ["Danube"]) and Match.parse("f1:0.6").correct("Danube river", ["Danube"])
    for bad in ("exact", "f1", "f1:0", "f1:1.5", "f1:x", "contain"):
        with pytest.raises(ConfigError, match="--match"):
            Match.parse(bad)


def test_contains_matches_whole_words_either_way_and_names_the_gold_it_matched():
    contains = Match.parse("contains")
    assert str(contains) == "contains" and contains.keeps_gold and not Match.parse("em").keeps_gold
    # the gold inside a sentence, and a fragment of a gold answer: both right, as the authors judge
    sentence = "Berthe di Vito-Delvaux was born on May 17, 1915"
    assert contains.matched_gold(sentence, ["Berthe Di Vito-Delvaux"]) == "Berthe Di Vito-Delvaux"
    assert contains.matched_gold("1810", ["19 July 1810"]) == "19 July 1810"
    assert contains.matched_gold("The Danube.", ["Rhine", "Danube"]) == "Danube"  # the alias it matched
    # whole words only: characters inside a word are not a match ("no" in "norway")
    assert contains.matched_gold("no", ["Norway"]) is None
    assert contains.matched_gold("Norwegian coast", ["Norway"]) is None
    assert contains.matched_gold("Jorge Guerrero", ["Berthe Di Vito-Delvaux"]) is None
    # empty and article-only answers are never right; yes/no datasets read the leading yes or no first
    assert contains.matched_gold("The", ["the Danube"]) is None and contains.matched_gold("", ["x"]) is None
    assert contains.matched_gold("Yes, both are American.", ["yes"], yes_no_dataset=True) == "yes"
    assert contains.matched_gold("No, not at all", ["yes"], yes_no_dataset=True) is None
    # em and f1 name the gold they matched too
    assert Match.parse("em").matched_gold("danube", ["Rhine", "The Danube"]) == "The Danube"
    assert Match.parse("f1:0.6").matched_gold("Danube river", ["Rhine", "Danube"]) == "Danube"
