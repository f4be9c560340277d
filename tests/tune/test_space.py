"""--space parsing: ranges, log and stepped ranges, lists, and each bad spec as one line (pure)."""

import pytest

from dynrag.errors import ConfigError
from dynrag.methods.registry import METHODS
from dynrag.retrieval.factory import RETRIEVERS
from dynrag.tune.space import check_names, grid_space, key, parse_param

DRAGIN = METHODS.get("dragin").options
HYBRID = RETRIEVERS.get("hybrid").options


def parse(spec, retriever=None):
    return parse_param(spec, DRAGIN, retriever, "dragin", "hybrid" if retriever else None)


def test_a_range_a_log_range_a_stepped_range_and_a_list():
    p = parse("theta=0.3:2.0")
    assert (p.kind, p.low, p.high, p.log, p.step, p.section) == ("float", 0.3, 2.0, False, None, "options")
    assert p.grid() is None and p.describe() == "theta=0.3:2"
    assert parse("theta=0.1:10:log").log
    stepped = parse("theta=0.5:1.5:0.25")
    assert stepped.grid() == [0.5, 0.75, 1.0, 1.25, 1.5]
    words = parse("query_words=10,20,30")
    assert (words.kind, words.choices) == ("list", (10, 20, 30))
    assert parse("query_words=10:30:10").grid() == [10, 20, 30] and parse("query_words=10:30").kind == "int"
    assert parse("variant=paper,reference").choices == ("paper", "reference")


def test_a_retriever_option_when_the_method_has_none_of_that_name():
    alpha = parse("alpha=0.1:0.7:0.2", HYBRID)
    assert alpha.section == "retriever_options" and key(alpha) == "retriever.alpha"
    assert alpha.grid() == [0.1, 0.3, 0.5, 0.7]
    assert parse("retriever.alpha=0.2,0.4", HYBRID).describe() == "retriever.alpha=0.2,0.4"


@pytest.mark.parametrize("spec, message", [
    ("theta=2.0:0.3", "--space theta=2.0:0.3: the range is inverted (low end 2 must be below high end 0.3)"),
    ("theta=1:1", "--space theta=1:1: the range is empty"),
    ("theta=low:2", "--space theta=low:2: low end 'low' is not a number (theta is a numeric option)"),
    ("query_words=ten,20", "--space query_words=ten,20: value 'ten' is not a number"),
    ("thetta=0.3:2", "--space thetta=0.3:2: unknown option 'thetta' of method 'dragin'; valid options: "),
    ("theta=-1:2", "--space theta=-1:2: theta must be at least 0 (got -1)"),
    ("theta=0:2:log", "a log range needs a low end above 0"),
    ("theta=0.3:2:5", "the step must be above 0 and at most HI - LO"),
    ("variant=a:b", "variant is not a numeric option; give its values as a list"),
    ("variant=paper,other", "variant must be 'paper' or 'reference' (got 'other')"),
    ("query_words=1.5:3", "query_words is a whole number"),
    ("theta", "expected NAME=LO:HI"),
    ("theta=1,,2", "an empty value in the list"),
])
def test_each_bad_spec_is_one_line_naming_it(spec, message):
    with pytest.raises(ConfigError) as exc:
        parse(spec)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_an_unknown_name_lists_the_retrievers_options_too():
    with pytest.raises(ConfigError, match=r"valid options: .*theta.*; retriever 'hybrid': .*alpha"):
        parse("alfa=0.1:0.5", HYBRID)


def test_twice_the_same_name_and_a_grid_of_an_unstepped_range():
    with pytest.raises(ConfigError, match="theta is given twice"):
        check_names([parse("theta=0.3:2"), parse("theta=1,2")])
    with pytest.raises(ConfigError, match="--sampler grid needs a list A,B,C or a range with a step"):
        grid_space([parse("theta=0.3:2")])
    assert grid_space([parse("theta=1,2"), parse("query_words=10:20:10")]) == {"theta": [1.0, 2.0], "query_words": [10, 20]}
