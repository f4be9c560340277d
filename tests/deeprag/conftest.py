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
            [person, [f"{person} was born in {town}."]],
            ["Weather", ["It often rains in the valley in spring."]],
        ],
        "supporting_facts": [[thing, 0], [person, 0]],
        "evidences": [[thing, "founded by", person], [person, "place of birth", town]],
    }


def write_wiki(path: Path, n: int) -> Path:
    path.write_text(json.dumps([wiki_record(i) for i in range(n)]), encoding="utf-8")
    return path


def word_tokenizer(texts):
    """A word-level tokenizer with one token per piece of `texts` (newlines are pieces of their own):
    no <unk> for any of them, and decoding gives the words back."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex("\n"), behavior="isolated"),
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True),
    ])
    vocab = {"<unk>": 0, "<bos>": 1, "<eos>": 2, "<pad>": 3}
    for text in texts:
        for piece, _ in pre.pre_tokenize_str(text):
            vocab.setdefault(piece, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<bos>", eos_token="<eos>",
                                   pad_token="<pad>")


def narrative_tokenizer(extra_texts=()):
    """A word-level tokenizer whose vocabulary holds every word of the narrative format, the worked
    examples, the fixtures above and `extra_texts`: no <unk>, so a tiny model can tell them apart."""
    from dynrag.methods.deeprag.narrative import Narrative
    from tests.deeprag.trajectories import trajectory
    from tests.tiny_models import WORDS

    texts = [Narrative(shots=4).prompt("x").text, " ".join(WORDS), *extra_texts]
    texts += [json.dumps(wiki_record(i)).replace('"', " ").replace(",", " ") for i in range(64)]
    texts += [" ".join(s["subquery"] + " " + s["answer"] + " " + " ".join(p["text"] for p in s["passages"])
                       for s in trajectory(i)["steps"]) + " " + trajectory(i)["question"] for i in range(8)]
    return word_tokenizer(texts)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random Llama and a word-level tokenizer for the narrative, saved as `hf:DIR`."""
    from tests.tiny_models import tiny_llama

    out = tmp_path_factory.mktemp("tiny-model")
    tok = narrative_tokenizer()
    tok.save_pretrained(out)
    tiny_llama(len(tok), seed=1).save_pretrained(out)
    return out
