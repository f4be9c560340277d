"""METHODS: the method registry behind build_method, parse_options and the CLI's --method."""

import pytest

from dynrag.errors import ConfigError
from dynrag.methods.fixed import FixedLength
from dynrag.methods.registry import METHODS, method_class, method_traits, method_names, parse_option_pairs, parse_options


def test_names_classes_and_summaries():
    assert method_names() == ["direct", "single", "fixed_length", "fixed_sentence", "flare", "dragin", "deeprag", "ircot", "etc", "seakr"]
    assert method_class("fixed_length") is FixedLength and [n for n in METHODS.names() if not method_traits(n).needs_retrieval] == ["direct"]
    assert all(line.split(": ", 1)[1] for line in METHODS.help_lines())  # every entry has a summary


def test_options_are_typed_and_errors_name_the_key_and_the_choices():
    assert parse_options("flare", {"theta": "0.2"}).theta == 0.2
    with pytest.raises(ConfigError, match=r"method 'flare': unknown option 'tehta'; valid options: .*theta"):
        parse_options("flare", {"tehta": "0.2"})
    with pytest.raises(ConfigError, match=r"unknown method 'magic'; choose one of: direct, single"):
        parse_options("magic", {})
    assert parse_option_pairs(["k=2", "preset=best"], preset="balanced") == {"k": "2", "preset": "best"}


def test_each_method_declares_its_traits_on_its_class_and_the_entry_carries_them():
    from dynrag.methods.base import MethodTraits

    for entry in METHODS:
        assert isinstance(entry.traits, MethodTraits) and entry.traits is entry.opener.traits
    assert method_traits("dragin").needs_attention and method_traits("dragin").needs_retrieval
    assert not method_traits("single").needs_attention
    assert method_traits("seakr").needs_hidden_states and not method_traits("dragin").needs_hidden_states
    assert not method_traits("direct").needs_retrieval
