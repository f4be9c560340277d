"""settled_stop (paper variant): the same decisions as the sentence-end check, or off where it cannot be."""

from types import SimpleNamespace

import numpy as np
import pytest

from dynrag.methods.dragin import method as dragin_method
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.registry import build_method

# Mid-sentence, no sentence end yet: "the bridge was built"; "bridge" is over theta = 0.3
# (entropy 5 x attention 0.5 from "was"), and "the" before it can never cross (entropy 0.1).
RAW = ["▁the", "▁bridge", "▁was", "▁built"]
ROWS = [np.array([1.0]), np.array([0.5, 0.5]), np.array([0.25, 0.5, 0.25]), np.array([0.25, 0.25, 0.25, 0.25])]


def decoding_state():
    return SimpleNamespace(
        token_ids=[10, 11, 12, 13], pieces=[t.replace("▁", " ") for t in RAW], raw_tokens=RAW,
        entropies=[0.1, 5.0, 0.1, 0.1], attention_rows=ROWS, prompt_length=0,
    )


def context_tagger(text):
    """A tagger whose tag for a word depends on the word after it, as a real one's can: "bridge"
    is a VERB when a word follows, a NOUN at the end (a stand-in; the point is the dependence)."""
    out, pos = [], 0
    words = text.split(" ")
    for k, w in enumerate(words):
        tag = "DET" if w == "the" else ("NOUN" if w == "bridge" and k == len(words) - 1 else "VERB")
        out.append((pos, pos + len(w), tag))
        pos += len(w) + 1
    return out


def dragin(lm, index, monkeypatch, **options):
    monkeypatch.setattr(dragin_method, "spacy_tagger", lambda name: context_tagger)
    return build_method("dragin", lm, index, {"theta": 0.3, **options}, PromptBuilder.for_dataset("default", n_exemplars=1))


def test_settled_stop_fires_mid_sentence_with_the_stopword_rule(lm, index, monkeypatch):
    method = dragin(lm, index, monkeypatch)
    assert method.settled_stop
    assert method._trigger_watch(False)(decoding_state()) is True


@pytest.mark.parametrize("asked", [True, False])
def test_settled_stop_is_off_with_part_of_speech_content_words(lm, index, monkeypatch, asked):
    method = dragin(lm, index, monkeypatch, content_words="pos", settled_stop=asked)
    assert method.settled_stop is False
    # the same state: no stop before the sentence ends, since a later word may still change a tag
    assert method._trigger_watch(False)(decoding_state()) is False
    answer = method.answer("who built the old bridge of the town ?")
    assert answer.trace.options["settled_stop"] is False
