"""The `reference` DRAGIN variant against small independent re-computations on a tiny random Llama.

Each expected value is computed here from the description of the authors' algorithm with an *eager*
copy of the model (transformers' own attention output), not with dynrag's capture or its scoring
functions, so a mistake in either shows up as a mismatch.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dynrag.errors import ConfigError
from dynrag.lm.base import Generation, Prompt
from dynrag.lm.hf import HFLanguageModel
from dynrag.methods.dragin.reference import last_tokens, reference_qfs_query, reference_word_scores
from dynrag.methods.dragin import method as dragin_method
from dynrag.methods.dragin.scoring import authors_trigger, reference_scores, reference_trigger
from dynrag.methods.dragin.wordscores import WordScores, sentence_index
from dynrag.methods.prompting import DOCUMENTS, PromptBuilder
from dynrag.methods.registry import build_method
from dynrag.text.content import content_flags
from dynrag.text.stopwords import is_content_word
from dynrag.text.words import merge_words
from tests.methods.conftest import without_unk
from tests.tiny_models import tiny_llama, tiny_tokenizer

SEED = 11
CHUNK = "the bridge was built in 1887 by the engineer . the engineer was born in lyon ."


def sharpened(model):
    # A random model's attention is nearly uniform, so a key's own row is always its largest; scaled
    # queries in the last layer make attention peaked, as in a trained model, so that rows of a
    # later sentence can hold a word's maximum (which the sentence-truncated pass would miss).
    with torch.no_grad():
        model.model.layers[-1].self_attn.q_proj.weight.mul_(16.0)
    return model


@pytest.fixture(scope="module")
def pair():
    """(dynrag's LM on the tiny model, an eager copy with the same weights, the tokenizer)."""
    tok = tiny_tokenizer(add_bos=True)
    model = without_unk(sharpened(tiny_llama(len(tok), seed=SEED)))
    eager = sharpened(tiny_llama(len(tok), seed=SEED, attn="eager"))
    return HFLanguageModel(model, tok, name="tiny"), eager, tok


def fake_generation(tok, text: str, seed: int = 0) -> Generation:
    """A Generation of exactly `text`'s tokens with made-up entropies (the formulas take any)."""
    ids = tok(text, add_special_tokens=False).input_ids
    raw = tok.convert_ids_to_tokens(ids)
    entropies = np.random.default_rng(seed).uniform(0.5, 3.0, len(ids)).astype(np.float32)
    return Generation(
        prompt=Prompt.of("x"), prompt_token_ids=[], prompt_offsets=[], prompt_raw_tokens=[],
        token_ids=ids, pieces=[" " + t.lstrip("▁") for t in raw], raw_tokens=raw,
        logprobs=np.zeros(len(ids), dtype=np.float32), entropies=entropies, attention=None,
        stop_reason="length", decoded_tokens=len(ids),
    )


def eager_attention(eager, ids) -> torch.Tensor:
    with torch.no_grad():
        return eager(torch.tensor([ids]), output_attentions=True).attentions[-1][0].double()  # (heads, T, T)


def expected_rind(eager, gen, *, with_bos=False, truncate_at_sentence=False, bos_id=1):
    """The authors' RIND from scratch: one word per token here (the tokenizer is word-level)."""
    ids = list(gen.token_ids)
    att = eager_attention(eager, ([bos_id] if with_bos else []) + ids)
    if with_bos:
        att = att[:, 1:, 1:]
    words = [t.lstrip("▁") for t in gen.raw_tokens]
    # sentence of each word: "." closes one
    sent, k = [], 0
    for w in words:
        sent.append(k)
        k += w == "."
    sent = np.array(sent)
    scores = np.zeros(len(words))
    for s in np.unique(sent):
        idx = np.flatnonzero(sent == s)
        rows = att[:, : idx[-1] + 1, :] if truncate_at_sentence else att
        col_max = rows.max(dim=1).values.mean(dim=0).numpy()  # max over query rows, mean over heads
        a = col_max[idx] / col_max[idx].sum() * len(idx)
        content = np.array([is_content_word(words[i]) for i in idx])
        scores[idx] = a * gen.entropies[idx] * content
    return scores


def test_rind_pass_has_no_bos_and_spans_the_whole_chunk(pair):
    lm, eager, tok = pair
    gen = fake_generation(tok, CHUNK)
    scored = reference_word_scores(lm, gen, lambda ws: content_flags(ws))
    expected = expected_rind(eager, gen)
    np.testing.assert_allclose(scored.scores, expected, rtol=1e-4, atol=1e-6)
    # Both points change the numbers, so the comparison above could not pass by accident.
    with_bos = expected_rind(eager, gen, with_bos=True)
    truncated = expected_rind(eager, gen, truncate_at_sentence=True)
    first_sentence = slice(0, CHUNK.split().index(".") + 1)
    assert not np.allclose(expected, with_bos, rtol=0.05)
    assert not np.allclose(expected[first_sentence], truncated[first_sentence], rtol=0.01)


def test_first_word_weight_differs_with_and_without_bos(pair):
    """Without BOS the first token absorbs attention, so the first word's weight changes."""
    lm, _, tok = pair
    ids = tok(CHUNK, add_special_tokens=False).input_ids
    without = lm.attention_pass(ids, per_head=True, bos=False)
    with_bos = lm.attention_pass(ids, per_head=True, bos=True)
    assert without.shape == with_bos.shape == (4, len(ids), len(ids))
    # Row 0 without BOS attends only to itself.
    np.testing.assert_allclose(without[:, 0, 0], 1.0, atol=1e-6)
    assert not np.allclose(without[:, :, 0], with_bos[:, :, 0], atol=1e-3)


def expected_qfs(eager, tok, question, answer_so_far, sentence, hits, n):
    """QFS from scratch: pass over [BOS] + question + text + sentence; the rows preceding the hits."""
    text = " ".join(p for p in (question, answer_so_far, sentence) if p)
    ids = tok(text).input_ids  # with BOS, as the tokenizer encodes a text
    words = [t.lstrip("▁") for t in tok.convert_ids_to_tokens(ids)]
    att = eager_attention(eager, ids).mean(dim=0).numpy()
    sentence_start = len(ids) - len(sentence.split())
    hit_pos = [sentence_start + h for h in hits]
    forward = np.zeros(len(ids))
    for p in hit_pos:  # every word is one token: its preceding row, over the positions before it
        row = att[p - 1, :p]
        forward[:p] += row / row.sum()
    forward /= len(hit_pos)
    candidates = [i for i in range(1, len(ids)) if i not in hit_pos and is_content_word(words[i])]
    ranked = sorted(candidates, key=lambda i: -forward[i])[:n]  # stable: ties to the earlier word
    return " ".join(words[i] for i in sorted(ranked))


@pytest.mark.parametrize("hits,n", [([1], 4), ([1, 5], 4), ([5, 8], 30)])
def test_qfs_from_a_fresh_pass_with_the_rows_before_the_hit_words(pair, hits, n):
    lm, eager, tok = pair
    question = "who built the bridge of the town ?"
    answer_so_far = "the town is north of lyon ."
    sentence = "the bridge was built in 1887 by the engineer ."
    gen = fake_generation(tok, sentence)
    words = merge_words(gen.raw_tokens, gen.pieces)
    query, made_of = reference_qfs_query(lm, question, answer_so_far, gen, words, hits, n, content_flags)
    assert query == expected_qfs(eager, tok, question, answer_so_far, sentence, hits, n)
    assert made_of["hit_words"] == [words[h].text for h in hits]


def test_stopword_only_trigger_does_not_fire():
    # Two sentences. In the first only stopwords ("the", "was") have H * a above theta: the released
    # code would trigger there and divide by zero hit words; here the first sentence does not trigger.
    entropy = np.array([3.0, 0.1, 3.0, 0.1, 0.2, 0.2])
    weights = np.array([1.5, 0.5, 1.0, 1.0, 0.5, 2.0])
    content = np.array([False, True, False, True, True, True])
    sentence = np.array([0, 0, 0, 0, 1, 1])
    scores = reference_scores(entropy, weights, content)
    assert (entropy * weights)[~content].max() > 1.0  # the stopwords would have crossed theta = 1
    found = reference_trigger(scores, sentence, 0.3)
    assert found is not None
    s, hits = found
    assert s == 1 and hits.tolist() == [5]  # 0.2 * 2.0 = 0.4 > 0.3
    assert reference_trigger(scores, sentence, 1.0) is None


def test_last_tokens_keeps_the_last_n(pair):
    lm, _, tok = pair
    text = " ".join(["bridge", "town", "river"] * 30)
    cut = last_tokens(lm, text, 64)
    ids = tok(text, add_special_tokens=False).input_ids
    assert tok(cut, add_special_tokens=False).input_ids == ids[-64:]
    assert last_tokens(lm, "the bridge", 64) == "the bridge"
    assert last_tokens(lm, text, None) == text


# --- the loop: documents for one sentence, the query's last 64 tokens ------------------------------


class Recording:
    """Wraps the LM's generate and the retriever's search to see every prompt and query."""

    def __init__(self, lm, index):
        self.lm, self.index, self.calls, self.queries = lm, index, [], []
        self.capabilities, self.name = lm.capabilities, lm.name

    def generate(self, prompt, *args, **kwargs):
        self.calls.append(("generate", any(s.name == DOCUMENTS for s in prompt.segments)))
        return self.lm.generate(prompt, *args, **kwargs)

    def search(self, query, k):
        self.calls.append(("search", query))
        self.queries.append(query)
        return self.index.search(query, k)

    def __getattr__(self, name):  # attention_pass, encode, ... go to the real model
        return getattr(self.lm, name)


# Mostly content words, so a QFS query over it can be longer than 64 tokens.
LONG_QUESTION = "who built " + " ".join(
    "bridge town river harbour mill school museum north south east west old new engineer city".split() * 5
) + " ?"


def run_reference(lm, index, question=LONG_QUESTION, **options):
    rec = Recording(lm, index)
    builder = PromptBuilder.for_dataset("default", n_exemplars=1)
    method = build_method("dragin", rec, rec, {"variant": "reference", "theta": 0.0, **options}, builder)
    return method.answer(question), rec


def test_documents_serve_one_sentence_then_generation_goes_on_without_them(pair, index):
    lm, _, _ = pair
    answer, rec = run_reference(lm, index, max_new_tokens=40, chunk_tokens=12, max_retrievals=3)
    assert answer.trace.retrievals, "theta = 0 must trigger on the random model's content words"
    calls = [c for c in rec.calls if c[0] == "generate"][: len(answer.trace.steps)]
    order = [kind if kind == "search" else ("docs" if arg else "plain") for kind, arg in rec.calls]
    # Every search is followed by exactly one generation with documents, then plain ones again.
    for i, kind in enumerate(order):
        if kind == "search":
            assert order[i + 1] == "docs"
        if kind == "docs":
            assert order[i - 1] == "search"
            assert i + 1 == len(order) or order[i + 1] in ("plain", "search")
    assert order[0] == "plain" and "docs" in order and calls
    with_docs = [s for s in answer.trace.steps if s.details.get("with_documents")]
    assert len(with_docs) == len(answer.trace.retrievals)
    for step in with_docs:  # one sentence at most
        assert step.kept_text.count(". ") == 0


def test_query_is_cut_to_its_last_64_tokens(pair, index):
    lm, _, tok = pair
    full, rec_full = run_reference(lm, index, max_new_tokens=16, max_retrievals=1, query_words=500,
                                   max_query_tokens=10_000)
    cut, rec_cut = run_reference(lm, index, max_new_tokens=16, max_retrievals=1, query_words=500)
    long_query = rec_full.queries[0]
    ids = tok(long_query, add_special_tokens=False).input_ids
    assert len(ids) > 64, "the test needs a query longer than 64 tokens"
    assert tok(rec_cut.queries[0], add_special_tokens=False).input_ids == ids[-64:]
    assert cut.trace.options["max_query_tokens"] == 64


def test_pos_content_rule_needs_a_tagger(pair, index):
    lm, _, _ = pair
    try:
        import spacy  # noqa: F401
        spacy.load("en_core_web_sm")
        pytest.skip("an English spaCy pipeline is installed here")
    except (ImportError, OSError):
        pass
    with pytest.raises(ConfigError, match="content_words"):
        run_reference(lm, index, content_words="pos")


# --- the stopword-only trigger: the authors' rule (default) or skipped -------------------------------


def test_authors_trigger_takes_any_word_over_theta_and_filters_the_hits_afterwards():
    # the arrays of test_stopword_only_trigger_does_not_fire: H * a = [4.5, 0.05, 3.0, 0.1, 0.1, 0.4]
    entropy = np.array([3.0, 0.1, 3.0, 0.1, 0.2, 0.2])
    weights = np.array([1.5, 0.5, 1.0, 1.0, 0.5, 2.0])
    content = np.array([False, True, False, True, True, True])
    sentence = np.array([0, 0, 0, 0, 1, 1])
    s, first, hits = authors_trigger(entropy * weights, content, sentence, 0.3)
    assert (s, first, hits.tolist()) == (0, 0, [])  # the stopwords' sentence, no hit word
    assert reference_trigger(reference_scores(entropy, weights, content), sentence, 0.3)[0] == 1  # skip: the next one
    s, first, hits = authors_trigger(entropy * weights, content, sentence, 0.06)
    assert (s, first, hits.tolist()) == (0, 0, [3])  # 0.1 > 0.06 is a content word; 0.05 is not over
    assert authors_trigger(entropy * weights, content, sentence, 5.0) is None


def test_qfs_without_hit_words_takes_the_first_content_words(pair):
    # The released code averages over zero hits (NaN weights); a sort on NaN keys keeps text order.
    lm, _, tok = pair
    question, so_far = "who built the old bridge of the town ?", "the town is north of lyon ."
    sentence = "the bridge was built in 1887 by the engineer ."
    gen = fake_generation(tok, sentence)
    words = merge_words(gen.raw_tokens, gen.pieces)
    for n in (3, 30):
        query, made_of = reference_qfs_query(lm, question, so_far, gen, words, [], n, content_flags)
        every = f"{question} {so_far} {sentence}".split()
        assert query == " ".join([w for w in every if is_content_word(w)][:n])
        assert made_of["hit_words"] == []


def stopwords_over_theta(lm, gen, content_test):
    """RIND scores where only stopwords have H * a over any theta below 5."""
    words = merge_words(gen.raw_tokens, gen.pieces)
    content = np.asarray(content_test([w.text for w in words]), dtype=bool)
    entropy = np.where(content, 0.0, 5.0)
    weights = np.ones(len(words))
    return WordScores(words, entropy, weights, content, reference_scores(entropy, weights, content),
                      sentence_index(words))


@pytest.mark.parametrize("rule", ["authors", "skip", None])
def test_a_stopword_only_sentence_retrieves_with_the_authors_rule(pair, index, monkeypatch, rule):
    monkeypatch.setattr(dragin_method, "reference_word_scores", stopwords_over_theta)
    lm, _, _ = pair
    question = "who built the old bridge of the town ?"
    options = {"theta": 1.0, "max_new_tokens": 24, "chunk_tokens": 12, "max_retrievals": 1, "query_words": 3}
    answer, rec = run_reference(lm, index, question, **options, **({"stopword_trigger": rule} if rule else {}))
    assert answer.trace.options["stopword_trigger"] == (rule or "authors")
    if rule == "skip":
        assert rec.queries == [] and not answer.trace.retrievals
    else:
        assert rec.queries == ["built old bridge"]  # the question's first three content words
        assert "stopwords only" in answer.trace.retrievals[0].reason


def test_the_authors_stopword_rule_needs_the_reference_variant(pair, index):
    lm, _, _ = pair
    builder = PromptBuilder.for_dataset("default", n_exemplars=1)
    with pytest.raises(ConfigError, match="stopword_trigger"):
        build_method("dragin", lm, index, {"variant": "paper", "stopword_trigger": "authors"}, builder)
    paper = build_method("dragin", lm, index, {"variant": "paper"}, builder)
    assert paper.stopword_trigger == "skip"


# --- whole chunks: the last one is not shrunk to the budget ----------------------------------------


class Budgets(Recording):
    """Records the token budget of every generate call."""

    def __init__(self, lm, index):
        super().__init__(lm, index)
        self.asked: list[int] = []

    def generate(self, prompt, max_new_tokens, *args, **kwargs):
        self.asked.append(max_new_tokens)
        return super().generate(prompt, max_new_tokens, *args, **kwargs)


@pytest.mark.parametrize("variant,asked", [("reference", [8, 8]), ("paper", [8, 2])])
def test_reference_decodes_every_chunk_at_full_length(pair, index, variant, asked):
    lm, _, _ = pair
    rec = Budgets(lm, index)
    builder = PromptBuilder.for_dataset("default", n_exemplars=1)
    options = {"variant": variant, "theta": 1e9, "max_new_tokens": 10, "chunk_tokens": 8, "early_stop": False}
    answer = build_method("dragin", rec, rec, options, builder).answer("who built the old bridge of the town ?")
    generated = [s for s in answer.trace.steps if s.kind == "generate"]
    assert rec.asked[: len(generated)] == asked
    # nothing stopped early here, so the reference variant kept 16 tokens: past the budget of 10, as the authors
    assert [s.kept_tokens for s in generated] == asked


@pytest.mark.parametrize("variant", ["reference", "paper"])
def test_other_query_forms_replace_qfs_at_the_same_trigger(pair, index, variant):
    lm, _, _ = pair
    question = "who built the old bridge of the town ?"
    common = {"variant": variant, "max_new_tokens": 16, "max_retrievals": 1, "max_query_tokens": 10_000}
    window, rec_window = run_reference(lm, index, question, query="last_words", query_words=3, **common)
    context, rec_context = run_reference(lm, index, question, query="full_context", **common)
    qfs, _ = run_reference(lm, index, question, **common)
    # the same trigger (theta 0: the first checked chunk), only what is searched for differs
    assert [r.reason for r in window.trace.retrievals] == [r.reason for r in qfs.trace.retrievals]
    assert len(rec_window.queries[0].split()) == 3
    assert rec_context.queries[0].startswith(question)
    assert rec_context.queries[0] != rec_window.queries[0]
