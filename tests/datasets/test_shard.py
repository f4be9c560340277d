"""Shards of a benchmark's questions, against hand-listed positions."""

from __future__ import annotations

import pytest

from dynrag.datasets.shard import Shard
from dynrag.errors import ConfigError


def test_a_shard_takes_every_kth_question_from_the_ith():
    questions = ["q0", "q1", "q2", "q3", "q4", "q5", "q6"]
    assert Shard.parse("1/3").pick(questions) == ["q0", "q3", "q6"]
    assert Shard.parse("2/3").pick(questions) == ["q1", "q4"]
    assert Shard.parse("3/3").pick(questions) == ["q2", "q5"]
    assert Shard.parse("1/1").pick(questions) == questions
    assert Shard.parse(" 2 / 3 ").positions(7) == [1, 4]
    assert str(Shard.parse("2/3")) == "2/3" and Shard(2, 3).slug == "shard2of3"


def test_the_shards_together_take_every_question_once():
    questions = list(range(11))
    parts = [Shard(i, 4).pick(questions) for i in range(1, 5)]
    assert parts == [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7]]
    assert sorted(q for part in parts for q in part) == questions
    assert [Shard(i, 4).positions(11) for i in range(1, 5)] == parts


@pytest.mark.parametrize("text", ["3/2", "0/2", "2", "a/b", "1/0", "-1/2"])
def test_a_bad_shard_is_refused_naming_the_flag_and_the_shape(text):
    with pytest.raises(ConfigError, match=r"^--shard .*(expected I/K|I must be 1 to K)"):
        Shard.parse(text)
