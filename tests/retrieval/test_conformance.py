"""One contract, every retriever: bm25, dense, hybrid, small-to-big, milvus and opensearch (a real
osmem-server) on the same corpus.

A new retriever joins by adding one fixture case below; it must then clamp k, return nothing for a
blank query, give the same hits one query at a time as in a batch, return hits that are the
corpus's passages with float scores, best first, and find the obvious passage for a keyword query.
"""

from __future__ import annotations

import pytest

from dynrag.retrieval import BM25Index, Hit, Retriever
from dynrag.retrieval.base import close_retriever
from dynrag.retrieval.dense import DenseIndex
from dynrag.retrieval.factory import open_retriever
from dynrag.retrieval.hybrid import HybridRetriever
from dynrag.text.chunking import parse_chunk_spec
from tests.fakes import HashEmbedder
from tests.retrieval.conftest import CORPUS

BY_ID = {p.id: p for p in CORPUS}
QUERIES = ["capital of Germany", "Canadian rock band drummer", "Zürich lake Switzerland", "honey bees"]
KINDS = ["bm25", "dense", "hybrid", "small-to-big", "milvus", "opensearch"]


def open_kind(kind: str, tmp_path, request) -> Retriever:
    embedder = HashEmbedder()
    out = tmp_path / kind
    if kind == "small-to-big":  # every passage fits one large chunk: its parents are the passages
        BM25Index.build(CORPUS, out, progress=False, chunk=parse_chunk_spec("small-to-big:4:64"))
        return open_retriever("bm25", out, {"backend": "numpy"}, work_dir=tmp_path, progress=False)
    if kind == "milvus":
        pytest.importorskip("milvus_lite")
        from dynrag.retrieval.milvus import MilvusRetriever

        return MilvusRetriever.build(CORPUS, str(tmp_path / "m.db"), "conformance", embedder, progress=False)
    if kind == "opensearch":
        from dynrag.retrieval.opensearch_ingest import build_opensearch_index

        url = request.getfixturevalue("opensearch_url")
        build_opensearch_index(CORPUS, url, "conformance", progress=False, replace=True)
        return open_retriever("opensearch", None, {"url": url, "index": "conformance"}, work_dir=tmp_path)
    BM25Index.build(CORPUS, out, progress=False)
    if kind == "bm25":
        return BM25Index.load(out, backend="numpy")
    DenseIndex.build_alongside(out, embedder, progress=False)
    dense = DenseIndex.load(out, embedder, backend="numpy")
    if kind == "dense":
        return dense
    return HybridRetriever(BM25Index.load(out, backend="numpy"), dense)


@pytest.fixture(scope="module", params=KINDS)
def retriever(request, tmp_path_factory):
    r = open_kind(request.param, tmp_path_factory.mktemp(request.param), request)
    yield r
    close_retriever(r)


def test_is_a_retriever(retriever):
    assert isinstance(retriever, Retriever)


def test_k_is_clamped_to_the_corpus_and_zero_gives_nothing(retriever):
    hits = retriever.search("the capital city of Germany and France", 100)
    assert 0 < len(hits) <= len(CORPUS)
    assert len({h.id for h in hits}) == len(hits)
    assert retriever.search("capital of Germany", 0) == []
    assert len(retriever.search("capital of Germany", 2)) <= 2


def test_a_blank_query_matches_nothing(retriever):
    assert retriever.search("", 3) == []
    assert retriever.search("   ", 3) == []
    assert retriever.search_batch(["", "capital of Germany"], 3)[0] == []


def test_search_is_search_batch_one_query_at_a_time(retriever):
    batch = retriever.search_batch(QUERIES, 3)
    single = [retriever.search(q, 3) for q in QUERIES]
    assert [[h.id for h in hits] for hits in batch] == [[h.id for h in hits] for hits in single]
    # a batched matrix product may round the last float32 digit differently
    assert [[h.score for h in hits] for hits in batch] == [pytest.approx([h.score for h in hits], rel=1e-5) for hits in single]
    assert retriever.search_batch([], 3) == []


def test_hits_are_the_corpus_passages_best_first(retriever):
    for hits in retriever.search_batch(QUERIES, 4):
        for hit in hits:
            assert isinstance(hit, Hit) and isinstance(hit.score, float)
            passage = BY_ID[hit.id]
            assert (hit.title, hit.text) == (passage.title, passage.text)
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)


def test_a_keyword_query_finds_its_passage(retriever):
    assert retriever.search("Berlin capital Germany", 2)[0].id == "berlin"
    assert "quotes" in [h.id for h in retriever.search('"hello" back slash tab', 3)]
