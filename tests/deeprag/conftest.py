"""Fixtures for the DeepRAG tests: a tiny benchmark in our own words, a tiny model on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# Invented places and people, so no model knows the answers from pre-training.
TOWNS = ["Corrow", "Tessaly", "Brindlemoor", "Ostrava Nova", "Quellin", "Harrowgate Vale", "Pellmar", "Sundry Cove"]
PEOPLE = ["Ada Byrne", "Marlow Fenwick", "Ines Catalan", "Joss Arkwright", "Petra Lund", "Elias Thorne", "Nuala Reyes", "Bram Okafor"]
THINGS = ["the Lantern Guild", "Harbour Mill", "the Copper Bridge", "North School", "the Tide Museum", "Gull Lighthouse",
          "the Salt Exchange", "Fennel Hall"]


def wiki_record(i: int) -> dict:
    """A 2WikiMultihopQA-format record: where was the founder of THING born?"""
    thing, person, town = THINGS[i % 8], PEOPLE[(i * 3) % 8], TOWNS[(i * 5) % 8]
    n = i // 8
    thing = thing if n == 0 else f"{thing} {n + 1}"
    return {
        "_id": f"q{i}",
        "type": "compositional",
        "question": f"Where was the founder of {thing} born?",
        "answer": town,
        "context": [
            [thing, [f"{thing} was founded by {person} in {1850 + i}."]],
            [person, [f"{person} was born in {town} and moved away young."]],
            ["Weather", ["It often rains in the valley in spring."]],
        ],
        "supporting_facts": [[thing, 0], [person, 0]],
        "evidences": [[thing, "founded by", person], [person, "place of birth", town]],
    }


def write_wiki(path: Path, n: int) -> Path:
    path.write_text(json.dumps([wiki_record(i) for i in range(n)]), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random Llama and its word-level tokenizer saved as an HF directory (`hf:DIR`)."""
    from tests.tiny_models import tiny_llama, tiny_tokenizer

    out = tmp_path_factory.mktemp("tiny-model")
    tok = tiny_tokenizer()
    tok.save_pretrained(out)
    tiny_llama(len(tok), seed=1).save_pretrained(out)
    return out
