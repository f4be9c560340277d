"""METHODS: the method registry behind build_method, parse_options and the CLI's --method."""

import pytest

from dynrag.errors import ConfigError
from dynrag.methods.fixed import FixedLength
from dynrag.methods.registry import METHODS, NO_RETRIEVAL, method_class, method_names, parse_option_pairs, parse_options


def test_names_classes_and_summaries():
    assert method_names() == ["direct", "single", "fixed_length", "fixed_sentence", "flare", "dragin", "deeprag"]
    assert method_class("fixed_length") is FixedLength and NO_RETRIEVAL == {"direct"}
    assert all(line.split(": ", 1)[1] for line in METHODS.help_lines())  # every entry has a summary


def test_options_are_typed_and_errors_name_the_key_and_the_choices():
    assert parse_options("flare", {"theta": "0.2"}).theta == 0.2
    with pytest.raises(ConfigError, match=r"method 'flare': unknown option 'tehta'; valid options: .*theta"):
        parse_options("flare", {"tehta": "0.2"})
    with pytest.raises(ConfigError, match=r"unknown method 'magic'; choose one of: direct, single"):
        parse_options("magic", {})
    assert parse_option_pairs(["k=2", "preset=best"], preset="balanced") == {"k": "2", "preset": "best"}
