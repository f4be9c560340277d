import pytest

from dynrag.context.repack import repack

RANKED = [1, 2, 3, 4, 5]  # best first


def test_forward_keeps_the_ranking():
    assert repack(RANKED, "forward") == [1, 2, 3, 4, 5]


def test_reverse_puts_the_best_last():
    assert repack(RANKED, "reverse") == [5, 4, 3, 2, 1]


def test_sides_puts_the_best_at_both_ends():
    assert repack(RANKED, "sides") == [1, 3, 5, 4, 2]
    assert repack([1, 2, 3, 4], "sides") == [1, 3, 4, 2]
    assert repack([1, 2], "sides") == [1, 2]


@pytest.mark.parametrize("order", ["forward", "reverse", "sides"])
def test_short_lists_and_no_mutation(order):
    assert repack([], order) == []
    assert repack([7], order) == [7]
    items = [1, 2, 3]
    repack(items, order)
    assert items == [1, 2, 3]


def test_unknown_order_names_the_choices():
    with pytest.raises(ValueError, match="forward, reverse, sides"):
        repack(RANKED, "middle")
