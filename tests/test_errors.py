"""Finding text that UTF-8 cannot encode, and saying where it is."""

from __future__ import annotations

import pytest

from dynrag.errors import DynragError, check_encodable, unencodable


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
