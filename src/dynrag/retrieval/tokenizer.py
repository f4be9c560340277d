"""BM25's tokenizer: text to stem ids, token for token as bm25s's own Tokenizer, a batch at a time.

Tokens are exactly those of ``bm25s.tokenization.Tokenizer(lower=True, stopwords="en",
stemmer=PyStemmer english)``: lower-case, regex ``\\b\\w\\w+\\b``, bm25s's English stopwords,
Snowball English stems. Stems get ids in first-occurrence order, as bm25s gives them, so a build
is reproducible and its files comparable with bm25s's own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np
import Stemmer

# Recorded in the index manifest: what a query must be tokenised with.
TOKENIZER_SETTINGS = {"stemmer": "english", "stopwords": "en", "lowercase": True}

_QUERY_CACHE_LIMIT = 1_000_000  # words remembered at query time before the cache is reset
_SPLIT = re.compile(r"(?u)\b\w\w+\b").findall  # bm25s's default splitter
# For ASCII text the same words come out of translate+split (every non-\w ASCII character
# becomes a space) at a fraction of the regex's cost; one-letter words are dropped by the
# cache lookup instead (they map to -1). Non-ASCII text keeps the regex.
_NON_WORD_ASCII = str.maketrans({c: " " for c in range(128) if not (chr(c).isalnum() or c == 95)})


class BM25Tokenizer:
    """Text to stem ids, matching bm25s's Tokenizer token for token but a batch at a time.

    Each distinct word is stopword-tested and stemmed once and cached as its id: -1 for a
    stopword, a one-letter word or (at query time) a stem the index has never seen.
    """

    def __init__(self, stem_to_id: dict[str, int] | None, *, grow: bool):
        # id 0 is bm25s's empty token "": the single token of a passage with no words.
        self.stem_to_id: dict[str, int] = stem_to_id if stem_to_id is not None else {"": 0}
        self._grow = grow
        self._word_to_id: dict[str, int] = {}
        from bm25s.stopwords import STOPWORDS_EN  # here: bm25s imports numba (see retrieval/bm25.py)

        self._stopwords = frozenset(STOPWORDS_EN)
        # PyStemmer's own cache (default 10k words) thrashes on a corpus and triples stemming
        # time; the word cache here already makes every word stemmed once.
        self._stem_words = Stemmer.Stemmer("english", 0).stemWords

    @staticmethod
    def split(text: str) -> list[str]:
        text = text.lower()
        if text.isascii():
            return text.translate(_NON_WORD_ASCII).split()
        return _SPLIT(text)

    def _learn(self, words: Iterable[str]) -> None:
        # First-occurrence order gives stems the same ids bm25s's Tokenizer gives them, so a
        # build is reproducible and its files comparable with bm25s's own.
        cache = self._word_to_id
        if not self._grow and len(cache) > _QUERY_CACHE_LIMIT:
            cache.clear()  # bound the memory of a long-running search process
        new = [w for w in dict.fromkeys(words) if w not in cache]
        if not new:
            return
        stem_to_id, stop = self.stem_to_id, self._stopwords
        for word, stem in zip(new, self._stem_words(new)):
            if len(word) < 2 or word in stop:
                cache[word] = -1
                continue
            sid = stem_to_id.get(stem)
            if sid is None:
                if self._grow:
                    sid = stem_to_id[stem] = len(stem_to_id)
                else:
                    sid = -1
            cache[word] = sid

    def corpus_batch(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Token ids of many texts as one flat int32 array plus each text's token count."""
        words: list[str] = []
        counts = np.empty(len(texts), dtype=np.int64)
        split = self.split
        for i, text in enumerate(texts):
            w = split(text)
            counts[i] = len(w)
            words.extend(w)
        self._learn(words)
        ids = np.array(list(map(self._word_to_id.__getitem__, words)), dtype=np.int32)
        keep = ids >= 0
        kept = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(keep, out=kept[1:])
        bounds = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(counts, out=bounds[1:])
        starts = kept[bounds[:-1]]
        lengths = kept[bounds[1:]] - starts
        flat = ids[keep]
        empty = lengths == 0
        if empty.any():  # as bm25s does: a text with no tokens gets the empty token, length 1
            flat = np.insert(flat, starts[empty], 0)
            lengths[empty] = 1
        return flat, lengths

    def query_ids(self, queries: Sequence[str]) -> list[list[int]]:
        """Token ids per query, words unknown to the index dropped (possibly leaving [])."""
        split = [self.split(q) for q in queries]
        cache = self._word_to_id
        for words in split:
            if not cache.keys() >= set(words):
                self._learn(w for ws in split for w in ws)
                break
        get = cache.__getitem__
        return [[i for i in map(get, ws) if i >= 0] for ws in split]
