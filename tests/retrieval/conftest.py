"""Retrieval fixtures: a small corpus and a tiny deterministic embedder (the real one: tests/conftest.py)."""

from __future__ import annotations

import pytest

from dynrag.corpus import Passage
from tests.fakes import HashEmbedder

CORPUS = [
    Passage("rush", "Rush (band)", "Rush was a Canadian rock band formed in Toronto in 1968."),
    Passage("peart", "Neil Peart", "Neil Peart was the drummer and lyricist of the band Rush."),
    Passage("paris", "Paris", "Paris is the capital and most populous city of France."),
    Passage("berlin", "Berlin", "Berlin is the capital and largest city of Germany."),
    Passage("bees", "Honey bee", "Honey bees are eusocial flying insects within the genus Apis."),
    Passage("quotes", 'The "Quoted" Title', 'He said "hello"\\back\nslash\ttab and left.'),
    Passage("unicode", "Zürich", "Zürich — the largest city in Switzerland — sits on a lake."),
    Passage("eiffel", "Eiffel Tower", "A wrought-iron lattice tower on the Champ de Mars."),
]


@pytest.fixture
def hash_embedder():
    return HashEmbedder()
