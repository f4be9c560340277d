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


def test_a_shard_is_read_back_from_the_end_of_a_name():
    assert Shard.ending("seakr-8f13a7-nall-shard2of6") == Shard(2, 6)
    assert Shard.ending("dynamic-family.m.hotpotqa-wiki-nall.rows-seakr.shard6of6") == Shard(6, 6)
    assert Shard.ending("seakr-8f13a7-nall") is None
    assert Shard.ending("seakr-shard7of6") is None  # not a shard that --shard would take
    assert Shard.problem("2/6") is None and Shard.problem("a: b") == "expected I/K, e.g. 2/4 (the second of four shards)"
