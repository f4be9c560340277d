"""HyDE: the hypothetical passage is written by the model and appended to the question."""

import pytest

from dynrag.corpus.passage import Passage
from dynrag.retrieval.bm25 import BM25Index
from dynrag.retrieval.hyde import HYDE_PROMPT, HydeRetriever, hyde_query, hypothetical_passage, join_query
from tests.tiny_models import tiny_llama_lm

QUESTION = "who built the bridge ?"


@pytest.fixture(scope="module")
def lm():
    return tiny_llama_lm(seed=1)


def test_hyde_query_is_the_question_then_the_models_passage(lm):
    expected = lm.generate(HYDE_PROMPT.format(question=QUESTION), 12, stop=("\n",)).text
    query = hyde_query(lm, QUESTION, max_new_tokens=12)
    assert query == join_query(QUESTION, " ".join(expected.split()))
    assert query.startswith(QUESTION)
    passage, decoded = hypothetical_passage(lm, QUESTION, max_new_tokens=12)
    assert 1 <= decoded <= 12 and query == f"{QUESTION} {passage}".strip()


def test_join_query_without_a_passage_is_the_question():
    assert join_query("  who built it? ", "") == "who built it?"


class Recorder:
    def __init__(self):
        self.queries = []

    def search(self, query, k):
        self.queries.append((query, k))
        return []

    def search_batch(self, queries, k):
        return [self.search(q, k) for q in queries]


def test_hyde_retriever_searches_the_inner_retriever_with_the_expanded_query(lm):
    inner = Recorder()
    hyde = HydeRetriever(inner, lm, max_new_tokens=8)
    hyde.search(QUESTION, 4)
    expected = hyde_query(lm, QUESTION, 8)
    assert inner.queries == [(expected, 4)] and hyde.last_query == expected
    hyde.search_batch([QUESTION, "where is the river ?"], 2)
    assert [q for q, _ in inner.queries[1:]] == [expected, hyde_query(lm, "where is the river ?", 8)]


def test_hyde_retriever_over_a_real_index(lm, tmp_path):
    texts = ["the old bridge was built in 1887", "the river flows south through lyon"]
    BM25Index.build([Passage(f"p{i}", "", t) for i, t in enumerate(texts)], tmp_path / "idx", progress=False)
    hits = HydeRetriever(BM25Index.load(tmp_path / "idx"), lm, 8).search("who built the bridge ?", 1)
    assert len(hits) == 1 and hits[0].id == "p0"
