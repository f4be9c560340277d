"""dynrag.registry: one entry shape, option parsing whose errors name the key and the choices."""

from __future__ import annotations

import pytest
from pydantic import Field

from dynrag.errors import ConfigError
from dynrag.registry import Options, Registry, parse_pairs, split_csv_pairs


class ToyOptions(Options):
    size: int = Field(3, ge=1)
    mode: str = "a"


def make_registry() -> Registry[tuple]:
    reg: Registry[tuple] = Registry("toy")

    @reg.register("first", ToyOptions, summary="the first toy")
    def open_first(options: ToyOptions, extra: str = "") -> tuple:
        return ("first", options.size, extra)

    reg.add("second", lambda options: ("second",))
    return reg


def test_open_validates_and_passes_arguments() -> None:
    reg = make_registry()
    assert reg.open("first", {"size": "5"}, extra="x") == ("first", 5, "x")
    assert reg.open("first", ToyOptions(size=2)) == ("first", 2, "")
    assert reg.names() == ["first", "second"]
    assert reg.choices() == "first | second"
    assert reg.help_lines() == ["first: the first toy", "second"]


def test_unknown_name_lists_choices() -> None:
    with pytest.raises(ConfigError, match=r"unknown toy 'third'; choose one of: first, second"):
        make_registry().get("third")


def test_unknown_option_lists_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"toy 'first': unknown option 'colour'; valid options: mode, size"):
        make_registry().parse_options("first", {"colour": "red"})


def test_bad_value_names_key_and_value() -> None:
    with pytest.raises(ConfigError, match=r"^toy 'first': option 'size': must be at least 1 \(got 0\)$"):
        make_registry().parse_options("first", {"size": "0"})


def test_duplicate_registration_is_refused() -> None:
    reg = make_registry()
    with pytest.raises(ValueError):
        reg.add("first", lambda o: ())


def test_parse_pairs() -> None:
    assert parse_pairs(["a=1", "max-steps = 4", "url=http://x/?q=1"]) == {"a": "1", "max_steps": "4", "url": "http://x/?q=1"}
    with pytest.raises(ConfigError, match=r"--option 'oops': expected KEY=VALUE"):
        parse_pairs(["oops"])
    assert split_csv_pairs(["a=1,b=2", "c=3"]) == ["a=1", "b=2", "c=3"]
    assert split_csv_pairs(["url=http://h:9200,index=psgs", "ks=3,10,x=1"]) == [
        "url=http://h:9200", "index=psgs", "ks=3,10", "x=1"]
