import json
from pathlib import Path

import numpy as np
import pytest

from dynrag.errors import DynragError, IndexDirError
from dynrag.retrieval import BM25Index, Hit, Retriever
from dynrag.retrieval import dense as dense_module
from dynrag.retrieval import vectors as vectors_module
from dynrag.retrieval.dense import DenseIndex, exact_top_k
from dynrag.retrieval.hybrid import HybridRetriever
from tests.retrieval.conftest import CORPUS, HashEmbedder


def has_dense(index_dir: Path) -> bool:
    return (index_dir / "dense" / "vectors.npy").exists()


@pytest.fixture(scope="module")
def real_index(tmp_path_factory, embedder):
    out = tmp_path_factory.mktemp("dense") / "index"
    DenseIndex.build(CORPUS, out, embedder, progress=False)
    with DenseIndex.load(out, embedder, backend="numpy") as idx:
        yield idx


def test_semantic_search_with_the_packaged_model(real_index):
    assert isinstance(real_index, Retriever)
    # No word in common with the passage beyond "band": the match is semantic.
    hits = real_index.search("Which musician played percussion for a group?", k=2)
    assert hits[0].id == "peart"
    assert hits[0] == Hit("peart", CORPUS[1].title, CORPUS[1].text, hits[0].score)
    assert hits[0].score > hits[1].score
    assert real_index.search("capital of Germany", k=1)[0].id == "berlin"
    assert real_index.search("insects that make honey", k=1)[0].id == "bees"


def test_manifest_files_and_vectors(real_index, embedder):
    path = real_index.path
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["format"] == "dynrag-dense" and manifest["format_version"] == 1
    assert manifest["count"] == len(CORPUS) and manifest["dimension"] == 384
    assert manifest["embedding_model"] == "all-MiniLM-L6-v2" and manifest["embedding_model_path"] is None
    assert manifest["passages"] == "self"
    vectors = np.load(path / "vectors.npy", mmap_mode="r")
    assert isinstance(vectors, np.memmap) and vectors.dtype == np.float32 and vectors.shape == (len(CORPUS), 384)
    expected = embedder.encode([f"{p.title}\n{p.text}" for p in CORPUS])
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
    # Passages round-trip exactly, escapes included.
    assert [real_index.passage(i) for i in range(len(CORPUS))] == CORPUS
    assert not list(path.parent.glob(".index.build-*"))  # no temp dir left behind


def test_same_corpus_same_checksum_as_bm25(tmp_path, real_index):
    manifest = BM25Index.build(CORPUS, tmp_path / "bm25", progress=False)
    assert manifest["corpus_sha256"] == real_index.manifest["corpus_sha256"]


def test_search_batch_k_clamp_and_empty(real_index):
    queries = ["drummer", "France", "a tower in Paris"]
    batch = real_index.search_batch(queries, k=3)
    single = [real_index.search(q, k=3) for q in queries]
    assert [[h.id for h in hits] for hits in batch] == [[h.id for h in hits] for hits in single]
    # Padding in a batch changes the query vectors in the last float bits only.
    assert [h.score for hits in batch for h in hits] == pytest.approx([h.score for hits in single for h in hits], abs=1e-5)
    assert len(real_index.search("anything", k=100)) == len(CORPUS)
    assert real_index.search("anything", k=0) == []
    assert real_index.search_batch([], k=3) == []


def test_streaming_build_in_many_batches(tmp_path, monkeypatch, hash_embedder):
    monkeypatch.setattr(dense_module, "_BUILD_BATCH", 3)  # 8 passages -> 3 flushes
    DenseIndex.build(iter(CORPUS), tmp_path / "i", hash_embedder, progress=False)
    with DenseIndex.load(tmp_path / "i", hash_embedder) as idx:
        vectors = np.load(tmp_path / "i" / "vectors.npy")
        np.testing.assert_allclose(vectors, hash_embedder.encode([f"{p.title}\n{p.text}" for p in CORPUS]))
        assert [idx.passage(i).id for i in range(len(idx))] == [p.id for p in CORPUS]
        assert idx.search("capital Germany Berlin", k=1)[0].id == "berlin"


def test_a_store_without_fields_from_an_older_build_still_searches(tmp_path, hash_embedder):
    # Standalone dense indexes written before the passage store was shared have no fields.npy.
    DenseIndex.build(CORPUS, tmp_path / "d", hash_embedder, progress=False)
    with DenseIndex.load(tmp_path / "d", hash_embedder) as idx:
        expected = idx.search_batch(["capital Germany", "hello back slash"], 3)
    (tmp_path / "d" / "fields.npy").unlink()
    with DenseIndex.load(tmp_path / "d", hash_embedder) as idx:
        assert idx.search_batch(["capital Germany", "hello back slash"], 3) == expected


def test_exact_top_k_matches_brute_force_across_blocks(monkeypatch):
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((103, 8)).astype(np.float32)
    vectors[7] = vectors[50]  # a tie: the lower row comes first
    queries = rng.standard_normal((5, 8)).astype(np.float32)
    queries[0] = vectors[50]
    monkeypatch.setattr(vectors_module, "_SEARCH_BLOCK", 10)
    rows, scores = exact_top_k(vectors, queries, 12)
    full = queries @ vectors.T
    for qi in range(5):
        expected = sorted(range(103), key=lambda r: (-full[qi, r], r))[:12]
        assert rows[qi].tolist() == expected
        np.testing.assert_allclose(scores[qi], full[qi, expected], rtol=1e-6)
    assert rows[0][:2].tolist() == [7, 50]
    rows, _ = exact_top_k(vectors, queries, 500)  # k above the corpus: every row once
    assert sorted(rows[0].tolist()) == list(range(103))


def test_alongside_a_bm25_index_and_hybrid_from_one_dir(tmp_path, hash_embedder):
    out = tmp_path / "idx"
    BM25Index.build(CORPUS, out, progress=False)
    assert not has_dense(out)
    manifest = DenseIndex.build_alongside(out, hash_embedder, progress=False)
    assert has_dense(out) and manifest["passages"] == "parent"
    assert sorted(p.name for p in (out / "dense").iterdir()) == ["manifest.json", "vectors.npy"]
    bm25_sha = json.loads((out / "manifest.json").read_text())["corpus_sha256"]
    assert manifest["corpus_sha256"] == bm25_sha
    for where in (out, out / "dense"):  # either directory opens the same dense part
        with DenseIndex.load(where, hash_embedder) as idx:
            assert idx.path == out / "dense" and len(idx) == len(CORPUS)
            assert idx.search("Berlin capital Germany", k=1)[0].id == "berlin"
    # The BM25 index is unaffected by its dense part.
    with BM25Index.load(out, backend="numpy") as bm25:
        assert bm25.search("drummer", k=1)[0].id == "peart"
    with HybridRetriever(BM25Index.load(out, backend="numpy"), DenseIndex.load(out, hash_embedder)) as hybrid:
        assert hybrid.search("Berlin capital of Germany", k=1)[0].id == "berlin"


def test_stale_dense_part_is_refused(tmp_path, hash_embedder):
    out = tmp_path / "idx"
    BM25Index.build(CORPUS, out, progress=False)
    DenseIndex.build_alongside(out, hash_embedder, progress=False)
    m = json.loads((out / "dense" / "manifest.json").read_text())
    m["corpus_sha256"] = "0" * 64
    (out / "dense" / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(IndexDirError, match="stale") as e:
        DenseIndex.load(out, hash_embedder)
    assert str(out) in str(e.value)
    # Rebuilding the BM25 index replaces the directory: the old dense part goes with it.
    BM25Index.build(CORPUS[:3], out, progress=False)
    assert not has_dense(out)


def assert_index_error(path: Path, match: str, embedder) -> None:
    with pytest.raises(IndexDirError, match=match) as e:
        DenseIndex.load(path, embedder)
    assert str(path) in str(e.value) and "dynrag index" in str(e.value)


def test_bad_or_missing_index_names_the_dir(tmp_path, hash_embedder):
    assert_index_error(tmp_path / "nope", "no such index directory", hash_embedder)
    (tmp_path / "empty").mkdir()
    assert_index_error(tmp_path / "empty", "no dense index here", hash_embedder)
    BM25Index.build(CORPUS, tmp_path / "bm25", progress=False)
    assert_index_error(tmp_path / "bm25", "has no dense part", hash_embedder)

    out = tmp_path / "d"
    DenseIndex.build(CORPUS, out, hash_embedder, progress=False)
    good = (out / "manifest.json").read_text()
    (out / "manifest.json").write_text("{not json")
    assert_index_error(out, "manifest.json:1: not valid JSON: expecting property name", hash_embedder)
    (out / "manifest.json").write_text(json.dumps({**json.loads(good), "format_version": 9}))
    assert_index_error(out, "version", hash_embedder)
    (out / "manifest.json").write_text(json.dumps({**json.loads(good), "count": 5}))
    assert_index_error(out, "manifest says float32 \\(5, 16\\)", hash_embedder)
    (out / "manifest.json").write_text(good)
    np.save(out / "vectors.npy", np.zeros((len(CORPUS), 16), dtype=np.float64))
    assert_index_error(out, "vectors.npy is float64", hash_embedder)
    (out / "vectors.npy").write_bytes(b"garbage")
    assert_index_error(out, "vectors.npy unreadable", hash_embedder)


def test_model_dimension_mismatch(tmp_path, hash_embedder):
    DenseIndex.build(CORPUS, tmp_path / "d", hash_embedder, progress=False)
    with pytest.raises(DynragError, match="16-dimensional.*gives 8.*hash-embedder"):
        DenseIndex.load(tmp_path / "d", HashEmbedder(dim=8))


def test_failed_build_leaves_the_old_index(tmp_path, hash_embedder):
    out = tmp_path / "d"
    DenseIndex.build(CORPUS, out, hash_embedder, progress=False)
    before = (out / "vectors.npy").read_bytes()

    def broken():
        yield CORPUS[0]
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        DenseIndex.build(broken(), out, hash_embedder, progress=False)
    assert (out / "vectors.npy").read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["d"]
    with pytest.raises(DynragError, match="no passages"):
        DenseIndex.build([], tmp_path / "e", hash_embedder, progress=False)
    assert not (tmp_path / "e").exists()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("keep me")
    with pytest.raises(IndexDirError, match="refusing to replace"):
        DenseIndex.build(CORPUS, tmp_path / "notes", hash_embedder, progress=False)


def test_faiss_backend_matches_numpy(tmp_path, hash_embedder):
    pytest.importorskip("faiss")
    DenseIndex.build(CORPUS, tmp_path / "d", hash_embedder, progress=False)
    with DenseIndex.load(tmp_path / "d", hash_embedder, backend="numpy") as a, \
            DenseIndex.load(tmp_path / "d", hash_embedder, backend="faiss") as b:
        assert b.backend == "faiss"
        for q in ["capital of France", "drummer band", "lake city"]:
            ha, hb = a.search(q, 4), b.search(q, 4)
            assert [h.score for h in ha] == pytest.approx([h.score for h in hb], abs=1e-5)


def test_faiss_backend_missing_is_a_clear_error(tmp_path, hash_embedder, monkeypatch):
    DenseIndex.build(CORPUS, tmp_path / "d", hash_embedder, progress=False)
    monkeypatch.setattr(dense_module, "faiss_available", lambda: False)
    with pytest.raises(DynragError, match="faiss is not installed"):
        DenseIndex.load(tmp_path / "d", hash_embedder, backend="faiss")
    with DenseIndex.load(tmp_path / "d", hash_embedder) as idx:
        assert idx.backend == "numpy"


def test_index_cli_with_dense(tmp_path):
    from typer.testing import CliRunner

    from dynrag.cli import app

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in CORPUS))
    r = CliRunner().invoke(app, ["index", str(corpus), "--out", str(tmp_path / "i"), "--dense"])
    assert r.exit_code == 0, r.output
    assert "embedded 8 passages (all-MiniLM-L6-v2, 384-d)" in r.output
    assert has_dense(tmp_path / "i")
    r = CliRunner().invoke(app, ["index", str(corpus), "--out", str(tmp_path / "j"), "--embedding-model", "x"])
    assert r.exit_code == 1 and "add --dense" in r.output
    r = CliRunner().invoke(
        app, ["index", str(corpus), "--out", str(tmp_path / "k"), "--dense", "--embedding-model", str(tmp_path)]
    )
    assert r.exit_code == 1 and "cannot load embedding model" in r.output
    assert not (tmp_path / "k").exists()  # the model is checked before anything is built
