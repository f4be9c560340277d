"""The ``reference`` DRAGIN variant's passes: RIND over a chunk and QFS over question + text + sentence.

As the authors' released code computes them (written here from its description; docs/methods.md
compares the two variants): the RIND pass runs over the generated chunk alone with no BOS token, attention
maxima run over the whole chunk and are normalised per sentence; the QFS pass is a fresh pass over
the question, the answer so far and the triggering sentence, as the tokenizer encodes a text (with
BOS where it adds one), reading the attention row of the position before each over-threshold word.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dynrag.lm.base import Generation
from dynrag.methods.chain import last_tokens  # noqa: F401  (the query cut, shared by every method)
from dynrag.methods.dragin.scoring import (
    qfs_select,
    reference_qfs_weights,
    reference_scores,
    reference_token_weights,
    reference_word_weights,
    word_entropy,
)
from dynrag.methods.dragin.wordscores import ContentTest, WordScores, sentence_index
from dynrag.text.stopwords import strip_punctuation
from dynrag.text.words import WordSpan, merge_words


def reference_word_scores(lm: Any, gen: Generation, content_test: ContentTest) -> WordScores:
    """RIND scores of every word of a chunk: ``H * a * s`` with sentence-normalised attention ``a``."""
    words = merge_words(gen.raw_tokens, gen.pieces)
    if not words:
        return WordScores.empty(words)
    content = np.asarray(content_test([w.text for w in words]), dtype=bool)
    sentence = sentence_index(words)
    entropy = word_entropy(gen.entropies, words)
    heads = lm.attention_pass(gen.token_ids, per_head=True, bos=False)
    weights = reference_word_weights(reference_token_weights(heads), words, sentence)
    return WordScores(words, entropy, weights, content, reference_scores(entropy, weights, content), sentence)


def _shift(words: list[WordSpan], offset: int) -> list[WordSpan]:
    return [WordSpan(w.text, w.start + offset, w.end + offset) for w in words]


def _leading_special_ids(lm: Any, text: str) -> tuple[list[int], list[int]]:
    """(the special ids the tokenizer puts before `text`, e.g. BOS; the ids of `text` itself)."""
    plain = lm.encode(text)
    full = lm.encode(text, special_tokens=True)
    if len(full) >= len(plain) and full[len(full) - len(plain) :] == plain:
        return full[: len(full) - len(plain)], plain
    return [], plain  # a tokenizer that adds something else than a prefix: pass the plain text


def reference_qfs_query(
    lm: Any,
    question: str,
    answer_so_far: str,
    gen: Generation,
    sentence_words: Sequence[WordSpan],
    hit_positions: Sequence[int],
    n_words: int,
    content_test: ContentTest,
) -> tuple[str, dict[str, Any]]:
    """The QFS query, and what it was made from, for the words ``hit_positions`` of one sentence.

    ``sentence_words`` are the triggering sentence's words (token ranges into ``gen``) and
    ``hit_positions`` index into them. The pass covers the question, ``answer_so_far`` (the text
    kept before that sentence) and the sentence's own tokens; candidates are the content words of
    all of it except the hit words, ranked by :func:`reference_qfs_weights`.
    """
    prefix = " ".join(p for p in (question.strip(), answer_so_far.strip()) if p)
    lead, prefix_ids = _leading_special_ids(lm, prefix)
    s0, s1 = sentence_words[0].start, sentence_words[-1].end
    ids = lead + prefix_ids + list(gen.token_ids[s0:s1])
    prefix_words = _shift(merge_words(lm.raw_tokens(prefix_ids)), len(lead)) if prefix_ids else []
    offset = len(lead) + len(prefix_ids) - s0
    spans = prefix_words + [WordSpan(w.text, w.start + offset, w.end + offset) for w in sentence_words]
    hits = [len(prefix_words) + h for h in hit_positions]
    weights = reference_qfs_weights(lm.attention_pass(ids, bos=False), spans, hits)
    texts = [w.text for w in spans]
    content = np.asarray(content_test(texts), dtype=bool)
    content[hits] = False  # the uncertain words themselves are not searched for
    selected = qfs_select(weights, texts, content, n_words)
    query = " ".join(w for w in (strip_punctuation(s) for s in selected) if w)
    return query, {"hit_words": [texts[h] for h in hits], "pass_tokens": len(ids)}
