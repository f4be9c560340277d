"""Benchmark context paragraphs added to a corpus (`dynrag index --add-contexts DATASET=FILE`).

Tuning a trigger on train questions over the corpus one evaluates with needs those questions' own
paragraphs in it: a Wikipedia dump made from dev contexts holds few of a train split's. Adding them
to the corpus keeps the haystack the dev runs search (same passages, same size order) while the
train questions can find their gold paragraphs. A paragraph the corpus already holds, by its text
with whitespace runs made single spaces, is not added twice: a duplicate would take a second slot
of every top-k it reaches.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path

from dynrag.corpus.passage import Passage
from dynrag.datasets.loaders import load_examples


def text_key(text: str) -> bytes:
    """A paragraph's identity for de-duplication: its whitespace-normalised text, hashed."""
    return hashlib.sha1(" ".join(text.split()).encode("utf-8")).digest()


def contexts_to_add(files: Sequence[tuple[str, Path]], present: Iterable[str]) -> list[Passage]:
    """Each distinct context paragraph of the benchmark ``files`` ((dataset name, path)), in file
    order, whose text is none of the ``present`` texts (the corpus's own)."""
    seen = {text_key(text) for text in present}
    added: list[Passage] = []
    for dataset, path in files:
        for example in load_examples(dataset, path):
            for paragraph in example.contexts:
                key = text_key(paragraph.text)
                if key not in seen:
                    seen.add(key)
                    added.append(paragraph)
    return added
