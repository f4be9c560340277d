"""Finding text that UTF-8 cannot encode, and saying where it is; json's and pydantic's errors put in
the one style of user messages."""

from __future__ import annotations

import json
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dynrag.errors import DataError, DynragError, check_encodable, json_error, json_problem, plain_error, unencodable


def test_text_that_encodes_is_left_alone():
    assert unencodable("plain, accented é, beyond the BMP: 💯") is None
    assert unencodable({"id": "x", "contexts": [{"text": "💯"}], "n": 3, "none": None}) is None


def test_a_lone_surrogate_is_named_by_its_place_and_shown_escaped():
    problem = unencodable({"id": "x", "contexts": [{"title": "T"}, {"text": "ab\udcff"}]})
    assert problem.startswith("contexts[1].text cannot be encoded as UTF-8: character 3 is a lone surrogate (\\udcff)")
    problem.encode("ascii")  # printable and sendable as it is
    assert unencodable({"ok": "a", "t\ud800": "b"}).startswith("a key cannot be encoded")
    assert unencodable(["a", ["b", "\udfff"]]).startswith("[1][1] cannot be encoded")


def test_check_encodable_raises_a_user_error_naming_the_input():
    check_encodable("Who?", "the question")
    with pytest.raises(DynragError, match=r"^the question cannot be encoded as UTF-8: character 1 "):
        check_encodable("\udcff", "the question")


# ---- json's errors in one wording ---------------------------------------------------------------

def decode_error(text: str | bytes) -> ValueError:
    try:
        json.loads(text)
    except ValueError as exc:
        return exc
    raise AssertionError(f"{text!r} parsed")


@pytest.mark.parametrize("text, problem", [
    ('{"id": "1", "text": "a\tb"}',
     "not valid JSON: invalid control character at column 23 (a tab or line break inside a string is written \\t or \\n)"),
    ('{"id": "1" "text": "b"}',
     "not valid JSON: expecting ',' delimiter at column 12 (items of a list or object are separated by ',')"),
    ('{"id": "1", "text": "a',
     "not valid JSON: unterminated string starting at column 21 (the text ends before the JSON does: is the file cut short?)"),
    ('{"id": "1", "text": ',
     "not valid JSON: expecting value at column 20 (the text ends before the JSON does: is the file cut short?)"),
    ('{"id": 1}{"id": 2}', "not valid JSON: extra data at column 10 (one JSON value only; a JSONL file holds one object per line)"),
    ("{id: 1}", "not valid JSON: expecting property name enclosed in double quotes at column 2 "
                "(keys are in double quotes, and no ',' follows the last item)"),
    ("\ufeff{}", "not valid JSON: it starts with a byte-order mark (save it as UTF-8 without one)"),
    (b'{"id": "\xff"}', "not UTF-8 text: invalid start byte at byte 9 (save the file as UTF-8)"),
])
def test_json_problems_read_in_one_style_from_the_message_and_column(text, problem):
    assert json_problem(decode_error(text)) == problem


def test_json_error_names_file_and_line_once():
    # a JSONL line parsed alone: json counts from line 1, the file line is the caller's
    err = json_error("c.jsonl", decode_error('{"a": 1,}'), 7)
    assert isinstance(err, DataError) and err.line == 7
    assert str(err) == ("c.jsonl:7: not valid JSON: expecting property name enclosed in double quotes at column 9 "
                        "(keys are in double quotes, and no ',' follows the last item)")
    # a whole file parsed at once: json's own line is the file's
    assert str(json_error("s.json", decode_error('[\n {"a": 1},\n {"a" 2}\n]'))).startswith(
        "s.json:3: not valid JSON: expecting ':' delimiter at column 7 (")
    # a line cut short is blamed where it ends, not past its newline (json says line 2, column 1)
    cut = json_error("c.jsonl", decode_error('{"a": \n'), 4)
    assert cut.line == 4 and "at column 6 (the text ends before the JSON does" in str(cut)
    # bytes that are not UTF-8 have no JSON line: the caller's, if any
    assert str(json_error("x.json", decode_error(b"\xff"))).startswith("x.json: not UTF-8 text: ")


def test_no_json_wording_leaks():
    for text in ('{"a": "x\ny"}', '{"a" 1}', "[1,", '{"a": "\\q"}', "", "nul"):
        problem = json_problem(decode_error(text))
        assert "at column" in problem and "at at" not in problem and "(char" not in problem and ": line" not in problem
        assert problem.count("\n") == 0


# ---- pydantic's errors in plain words ---------------------------------------------------------------


class Toy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    limit: int = Field(1, ge=1, le=100)
    ratio: float = Field(0.5, gt=0, lt=1)
    flag: bool = False
    mode: str = Field("a", pattern="^[ab]$")
    kind: Literal["constant", "cosine"] = "constant"
    name: str = ""
    need: int


def first_error(**values) -> dict:
    try:
        Toy(**values)
    except ValidationError as exc:
        return exc.errors()[0]
    raise AssertionError("valid")


@pytest.mark.parametrize("values, words", [
    ({"limit": 0}, "must be at least 1 (got 0)"),
    ({"limit": "0"}, "must be at least 1 (got 0)"),  # typed on the command line: still a number
    ({"limit": 101}, "must be at most 100 (got 101)"),
    ({"ratio": 0}, "must be more than 0 (got 0)"),
    ({"ratio": 1.5}, "must be less than 1 (got 1.5)"),
    ({"limit": "ten"}, "must be a whole number (got 'ten')"),
    ({"limit": 2.5}, "must be a whole number (got 2.5)"),
    ({"ratio": "high"}, "must be a number (got 'high')"),
    ({"flag": "perhaps"}, "must be true or false (got 'perhaps')"),
    ({"kind": "linear"}, "must be 'constant' or 'cosine' (got 'linear')"),
    ({"name": 3}, "must be text (got 3)"),
    ({"colour": "red"}, "unknown key"),
    ({}, "is required"),
])
def test_common_pydantic_errors_read_as_plain_words(values, words):
    assert plain_error(first_error(**({"need": 1} | values if values else {}))) == words


def test_an_unlisted_type_keeps_its_meaning_without_pydantic_s_phrasing():
    words = plain_error(first_error(need=1, mode="c"))
    assert words.startswith("must match the pattern") and words.endswith("(got 'c')")
    assert plain_error({"type": "new_kind", "msg": "Input should be a valid frobnicator", "input": "x"}) == (
        "must be a valid frobnicator (got 'x')")
    # a validator's own message loses pydantic's prefix, and a whole model's input is not quoted
    assert plain_error({"type": "value_error", "msg": "Value error, size must be >= 1", "input": {"size": 0}}) == (
        "size must be >= 1")
    assert len(plain_error({"type": "int_parsing", "msg": "", "input": "9" * 200})) < 100
