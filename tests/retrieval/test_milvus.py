"""The Milvus backend against real milvus-lite (a local database in tmp_path)."""

import pytest

from dynrag.errors import ConfigError, DynragError, IndexDirError
from dynrag.retrieval import Hit, Retriever
from dynrag.retrieval.milvus import MilvusRetriever, analyzer_params
from tests.retrieval.conftest import CORPUS, HashEmbedder

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")


@pytest.fixture(scope="module")
def milvus(tmp_path_factory, embedder):
    uri = str(tmp_path_factory.mktemp("milvus") / "test.milvus.db")
    with MilvusRetriever.build(CORPUS, uri, "corpus", embedder, progress=False) as r:
        yield r


def test_three_modes(milvus):
    assert isinstance(milvus, Retriever) and len(milvus) == len(CORPUS)
    # BM25: keyword match; stop words alone match nothing; no shared term means no hit.
    bm25 = milvus.search("capital Germany", k=3, mode="bm25")
    assert bm25[0].id == "berlin" and bm25[0].score > 0
    assert {h.id for h in bm25} == {"berlin", "paris"}
    assert milvus.search("the of and", k=3, mode="bm25") == []
    assert bm25[0] == Hit("berlin", "Berlin", CORPUS[3].text, bm25[0].score)
    # Dense: a paraphrase without shared words.
    dense = milvus.search("Which musician played percussion for a group?", k=2, mode="dense")
    assert dense[0].id == "peart" and dense[0].score > dense[1].score
    # Hybrid (RRF, the default mode): both signals.
    hybrid = milvus.search("capital of Germany", k=3)
    assert hybrid[0].id == "berlin" and len(hybrid) == 3
    assert milvus.search("percussionist in a group", k=1)[0].id == "peart"
    # Escapes and unicode survive the round trip.
    hit = milvus.search("Zürich Switzerland lake", k=1, mode="bm25")[0]
    assert hit.title == "Zürich" and "—" in hit.text


def test_batch_and_weighted_ranker(milvus):
    queries = ["drummer of Rush", "honey bees"]
    batch = milvus.search_batch(queries, 2)
    assert [b[0].id for b in batch] == ["peart", "bees"]
    weighted = MilvusRetriever(milvus.client, milvus.collection, milvus.embedder, ranker="weighted", alpha=0.3)
    assert [b[0].id for b in weighted.search_batch(queries, 2)] == ["peart", "bees"]
    assert milvus.search_batch([], 3) == [] and milvus.search("x", 0) == []
    with pytest.raises(ConfigError):
        milvus.search("x", 3, mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        MilvusRetriever(milvus.client, milvus.collection, milvus.embedder, ranker="max")  # type: ignore[arg-type]


@pytest.mark.slow  # builds and reopens three milvus-lite databases: over three seconds
def test_open_rebuild_and_errors(tmp_path, embedder):
    uri = str(tmp_path / "m.db")
    MilvusRetriever.build(CORPUS[:3], uri, "c", embedder, progress=False).close()
    with MilvusRetriever.open(uri, "c", embedder, mode="bm25") as r:
        assert len(r) == 3 and r.search("drummer", 1)[0].id == "peart"
    # Rebuilding replaces the collection; no temporary collection is left.
    with MilvusRetriever.build(CORPUS, uri, "c", embedder, progress=False) as r:
        assert len(r) == len(CORPUS)
        assert r.client.list_collections() == ["c"]
    with pytest.raises(IndexDirError, match="no collection 'missing'.*it has: c"):
        MilvusRetriever.open(uri, "missing", embedder)
    with pytest.raises(DynragError, match="384-dimensional.*gives 16"):
        MilvusRetriever.open(uri, "c", HashEmbedder())
    with pytest.raises(DynragError, match="no passages"):
        MilvusRetriever.build([], uri, "empty", embedder, progress=False)


def test_analyzer_is_portable():
    params = analyzer_params()
    assert params["tokenizer"] == "standard"
    stop = next(f for f in params["filter"] if isinstance(f, dict) and f["type"] == "stop")
    assert "the" in stop["stop_words"] and "germany" not in stop["stop_words"]
