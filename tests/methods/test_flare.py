"""FLARE as published: look-ahead without documents, beta for masking, explicit questions, first retrieval."""

from __future__ import annotations

import numpy as np

from dynrag.methods.flare import interleave, is_uncertain, masked_query, uncertain_spans
from dynrag.methods.prompting import DOCUMENTS, PromptBuilder
from dynrag.methods.registry import build_method
from dynrag.retrieval.base import Hit

QUESTION = "who built the bridge of the town ?"


class Recording:
    """Sees every prompt (with or without documents) and every search, in order."""

    def __init__(self, lm, index):
        self.lm, self.index, self.events = lm, index, []
        self.capabilities, self.name = lm.capabilities, lm.name

    def generate(self, prompt, *args, **kwargs):
        segments = getattr(prompt, "segments", None)
        if segments is None:
            self.events.append(("ask", None))  # a plain-text prompt: a question being written
        else:
            self.events.append(("docs" if any(s.name == DOCUMENTS for s in segments) else "plain", None))
        return self.lm.generate(prompt, *args, **kwargs)

    def search(self, query, k):
        self.events.append(("search", query))
        return self.index.search(query, k)

    def __getattr__(self, name):
        return getattr(self.lm, name)


def run(lm, index, **options):
    # The random model rarely ends a sentence: 6-token "sentences" give several steps per answer.
    options.setdefault("max_sentence_tokens", 6)
    rec = Recording(lm, index)
    method = build_method("flare", rec, rec, options, PromptBuilder.for_dataset("default", n_exemplars=1))
    return method.answer(QUESTION), rec


def kinds(rec):
    return [k for k, _ in rec.events]


def test_lookahead_is_written_without_the_previous_documents(lm, index):
    answer, rec = run(lm, index, theta=1.0, max_new_tokens=30, max_retrievals=3)
    assert len(answer.trace.retrievals) >= 2, "theta = 1 retrieves for every sentence"
    seq = kinds(rec)
    if answer.trace.steps[-1].kind == "finish":  # the answer phrase is finished with the held documents
        seq = seq[:-1]
    # tentative (no documents) -> search -> the sentence again with the new documents, every step
    for i, k in enumerate(seq):
        if k == "search":
            assert seq[i - 1] == "plain" and seq[i + 1] == "docs"
    assert seq.count("docs") == len(answer.trace.retrievals)
    assert "docs" not in [seq[i + 1] for i, k in enumerate(seq[:-1]) if k == "docs"]
    # the old behaviour, as an option: the look-ahead sees the documents of the last retrieval
    _, old = run(lm, index, theta=1.0, max_new_tokens=30, max_retrievals=3, tentative_with_documents=True)
    seq = kinds(old)
    first_search = seq.index("search")
    assert seq[first_search + 2] == "docs"  # the next look-ahead already has documents


def test_beta_is_its_own_masking_threshold(lm, index):
    answer, rec = run(lm, index, theta=1.0, beta=0.0, max_new_tokens=20, max_retrievals=1)
    tentative = [s for s in answer.trace.steps if s.kind == "tentative"][0]
    query = [q for k, q in rec.events if k == "search"][0]
    assert query == " ".join(tentative.text.split())  # beta = 0 masks nothing
    answer, rec = run(lm, index, theta=1.0, beta=1.0, max_new_tokens=20, max_retrievals=1)
    assert [q for k, q in rec.events if k == "search"][0] == QUESTION  # everything masked: the question
    assert answer.trace.options["beta"] == 1.0
    defaulted, _ = run(lm, index, theta=0.7, max_new_tokens=8, max_retrievals=0)
    assert defaulted.trace.options["beta"] == 0.7


def test_masked_query_and_uncertain_spans():
    pieces = [" The", " bridge", " opened", " in", " 18", "87", "."]
    raw = ["▁The", "▁bridge", "▁opened", "▁in", "▁18", "87", "."]
    probs = np.array([0.9, 0.8, 0.2, 0.95, 0.1, 0.9, 0.99])
    assert masked_query(pieces, probs, 0.5) == "The bridge in87."
    assert masked_query(pieces, probs, 0.15) == "The bridge opened in87."
    # words with a token below 0.5: "opened" and "1887." (not adjacent: two spans); below 0.85 "bridge opened" joins
    assert uncertain_spans(raw, pieces, probs, 0.5) == ["opened", "1887."]
    assert uncertain_spans(raw, pieces, probs, 0.85) == ["bridge opened", "1887."]


def test_explicit_queries_are_questions_written_for_each_span_below_beta(lm, index):
    # Learn the first look-ahead's token probabilities, then set beta at their median so that some
    # words are unsure and some not: the spans are the runs of words below beta (one token per word
    # here). theta = 1 triggers on every sentence; were the spans cut by theta, all would be one.
    probe, _ = run(lm, index, theta=1.0, max_new_tokens=6, max_retrievals=1)
    first = [s for s in probe.trace.steps if s.kind == "tentative"][0]
    probs = np.array(first.details["probabilities"])
    beta = float(np.median(probs)) + 1e-6
    runs, current = [], []
    for piece, p in zip(first.details["tokens"], probs):
        if p < beta:
            current.append(piece.strip())
        elif current:
            runs.append(" ".join(current))
            current = []
    runs += [" ".join(current)] if current else []
    assert runs and runs != [" ".join(t.strip() for t in first.details["tokens"])]

    answer, rec = run(lm, index, theta=1.0, beta=beta, query="questions", max_new_tokens=6, max_retrievals=1)
    asked = [s for s in answer.trace.steps if s.kind == "question"]
    assert [s.details["span"] for s in asked] == runs
    written = [s.text.strip() for s in asked if s.text.strip()]
    retrieval = answer.trace.retrievals[0]
    searches = [q for k, q in rec.events if k == "search"]
    if written:  # one search per written question, merged into one retrieval of at most k passages
        assert searches == written and retrieval.query == " | ".join(written)
    assert len(retrieval.hits) <= 3 and kinds(rec).count("ask") == len(runs)


def test_interleave_round_robin_without_repeats():
    def hits(*ids):
        return [Hit(i, "", "", 1.0) for i in ids]

    merged = interleave([hits("a", "b", "c"), hits("b", "d"), hits("e")], 4)
    assert [h.id for h in merged] == ["a", "b", "e", "d"]
    assert [h.id for h in interleave([hits("a"), hits("a")], 3)] == ["a"]
    assert interleave([], 3) == []


def test_first_retrieval_uses_the_question_and_feeds_the_first_sentence(lm, index):
    answer, rec = run(lm, index, theta=0.0, first_retrieval=True, max_new_tokens=16)
    assert rec.events[0] == ("search", QUESTION)
    assert rec.events[1][0] == "docs"  # the first sentence sees the question's documents
    seq = kinds(rec)
    # theta = 0 never retrieves again, and later look-aheads are written without documents (the
    # last call finishes the answer phrase with the documents the method holds).
    assert answer.trace.steps[-1].kind == "finish" and len(seq) > 3
    assert all(k == "plain" for k in seq[2:-1])
    assert len(answer.trace.retrievals) == 1


def test_mean_trigger_differs_from_any_token():
    pieces = [" a", " b", " c", " "]
    probs = np.array([0.95, 0.2, 0.95, 0.01])  # one unsure token (the blank one does not count); mean 0.7
    assert is_uncertain(pieces, probs, 0.5, "any")
    assert not is_uncertain(pieces, probs, 0.5, "mean")
    assert is_uncertain(pieces, probs, 0.75, "mean")
    assert not is_uncertain([" "], np.array([0.0]), 0.5, "any")
