"""The OpenSearch backend against a real OpenSearch-compatible server (osmem-server on a free
loopback port, tests/conftest.py): ingest of the demo corpus, search, rankings beside bm25s's,
a SIGKILL mid-ingest and the re-run that finishes it, and the one-line errors.

osmem-server ignores a custom BM25 similarity (k1, b) and scores unlike Lucene, so rankings are
compared, never scores; the settings it stores are checked instead."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dynrag.corpus import Passage, read_passages
from dynrag.data import demo_passages_path, load_demo_questions
from dynrag.errors import DynragError, IndexDirError
from dynrag.retrieval.bm25 import BM25Index
from dynrag.retrieval.factory import open_retriever
from dynrag.retrieval.opensearch import OpenSearchRetriever, connect, index_meta
from dynrag.retrieval.opensearch_ingest import build_opensearch_index, source_identity
from tests.cli_inprocess import run_in_process
from tests.waiting import kill_when

REPO = Path(__file__).resolve().parents[2]
DYNRAG = str(Path(sys.executable).parent / "dynrag")


@pytest.fixture(scope="module")
def demo_index(opensearch_url):
    meta = build_opensearch_index(read_passages(demo_passages_path()), opensearch_url, "demo", replace=True,
                                  progress=False, source=source_identity(demo_passages_path()))
    return meta


def overlap_at(a, b, k):
    return len({h.id for h in a[:k]} & {h.id for h in b[:k]}) / k


def test_demo_corpus_ingests_complete_with_the_papers_settings(opensearch_url, demo_index, tmp_path):
    assert demo_index["complete"] and demo_index["passage_count"] == demo_index["ingested"] == 175
    # the same checksum a local BM25 index of the same corpus records
    manifest = BM25Index.build(read_passages(demo_passages_path()), tmp_path / "bm25", progress=False)
    assert demo_index["corpus_sha256"] == manifest["corpus_sha256"]
    client = connect(opensearch_url)
    settings = client.indices.get_settings(index="demo")["demo"]["settings"]["index"]
    assert settings["similarity"]["dynrag_bm25"] == {"type": "BM25", "k1": "1.2", "b": "0.75"}
    assert settings.get("refresh_interval") in (None, "1s")  # ingest turned it off, the end back on
    mapping = client.indices.get_mapping(index="demo")["demo"]["mappings"]["properties"]
    assert mapping["text"]["analyzer"] == mapping["title"]["analyzer"] == "english"
    analysed = client.indices.analyze(index="demo", body={"field": "text", "text": "The lanterns were burning"})
    # Lucene's short English stop list drops "the" but keeps "were" (bm25s's list drops both); Porter stems
    assert [t["token"] for t in analysed["tokens"]] == ["lantern", "were", "burn"]
    client.close()


def test_rankings_overlap_with_bm25s_on_the_same_corpus(opensearch_url, demo_index, tmp_path):
    BM25Index.build(read_passages(demo_passages_path()), tmp_path / "bm25", progress=False)
    questions = [q.question for q in load_demo_questions()]
    with BM25Index.load(tmp_path / "bm25", backend="numpy") as bm25, \
            OpenSearchRetriever.open(opensearch_url, "demo") as osr:
        ours, theirs = bm25.search_batch(questions, 10), osr.search_batch(questions, 10)
    top10 = sum(overlap_at(a, b, 10) for a, b in zip(ours, theirs)) / len(questions)
    top1 = sum(a[0].id == b[0].id for a, b in zip(ours, theirs)) / len(questions)
    print(f"\nopensearch vs bm25s on the demo corpus, {len(questions)} questions: "
          f"mean top-10 overlap {top10:.2f}, same first hit {top1:.2f}")
    assert top10 >= 0.6 and top1 >= 0.5  # the same BM25 idea; analyzers and field weighting differ


def test_k1_and_b_are_settable_and_a_changed_setting_needs_replace(opensearch_url):
    passages = [Passage(f"p{i}", f"Title {i}", f"harbour town number {i} has a mill") for i in range(30)]
    source = {"path": "/corpus", "size": 1, "mtime_ns": 1}
    build_opensearch_index(passages, opensearch_url, "tuned", k1=0.9, b=0.4, progress=False, replace=True,
                           source=source)
    client = connect(opensearch_url)
    assert client.indices.get_settings(index="tuned")["tuned"]["settings"]["index"]["similarity"]["dynrag_bm25"] == {
        "type": "BM25", "k1": "0.9", "b": "0.4"}
    with pytest.raises(IndexDirError, match=r"holds another corpus or other settings .*k1=0.9.*--replace"):
        build_opensearch_index(passages, opensearch_url, "tuned", k1=1.2, progress=False, source=source)
    meta = build_opensearch_index(passages[:10], opensearch_url, "tuned", k1=1.2, progress=False, source=source,
                                  replace=True)
    assert meta["passage_count"] == 10 and meta["k1"] == 1.2
    client.indices.create(index="foreign", body={"mappings": {"properties": {"text": {"type": "text"}}}})
    with pytest.raises(IndexDirError, match="exists and was not built by dynrag"):
        build_opensearch_index(passages, opensearch_url, "foreign", progress=False)
    client.close()


def corpus_file(path: Path, n: int) -> Path:
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"doc-{i}", "title": f"Mill {i}", "text": f"The mill called mill{i} stands in "
                                f"the harbour town town{i % 97}, beside the river."}) + "\n")
    return path


@pytest.mark.slow
def test_sigkill_mid_ingest_then_the_same_command_completes_without_duplicates(opensearch_url, tmp_path):
    n = 4000
    corpus = corpus_file(tmp_path / "corpus.jsonl", n)
    cmd = [DYNRAG, "index", str(corpus), "--engine", "opensearch", "--url", opensearch_url, "--name", "killed",
           "--batch-size", "20"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = connect(opensearch_url)

    def two_hundred_ingested() -> bool:
        return client.indices.exists(index="killed") and (index_meta(client, opensearch_url, "killed") or {}).get(
            "ingested", 0) >= 200

    kill_when(proc, two_hundred_ingested, "200 documents ingested")
    assert proc.returncode == -signal.SIGKILL
    partial = index_meta(client, opensearch_url, "killed")
    assert not partial["complete"] and 200 <= partial["ingested"] < n
    with pytest.raises(IndexDirError, match=r"incomplete: ingest stopped after .* run the same"):
        OpenSearchRetriever.open(opensearch_url, "killed")

    again = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert f"resuming index 'killed' at {opensearch_url}: " in again.stderr
    meta = index_meta(client, opensearch_url, "killed")
    assert meta["complete"] and meta["ingested"] == meta["passage_count"] == n
    client.indices.refresh(index="killed")
    assert client.count(index="killed")["count"] == n  # every passage once: ids are document ids
    ids = {h["_id"] for h in client.search(index="killed", body={"size": n, "_source": False,
                                                                  "query": {"match_all": {}}})["hits"]["hits"]}
    assert ids == {f"doc-{i}" for i in range(n)}
    manifest = BM25Index.build(read_passages(corpus), tmp_path / "bm25", progress=False)
    assert meta["corpus_sha256"] == manifest["corpus_sha256"]  # every passage hashed, skipped ones too
    hits = OpenSearchRetriever.open(opensearch_url, "killed").search("mill3999 harbour", 1)
    assert hits[0].id == "doc-3999"
    client.close()


def test_errors_are_one_line(opensearch_url, demo_index, tmp_path):
    with pytest.raises(DynragError, match=r"cannot reach OpenSearch at http://127.0.0.1:9 \(Connection refused\)"):
        open_retriever("opensearch", None, {"url": "http://127.0.0.1:9", "timeout": 2}, work_dir=tmp_path)
    with pytest.raises(IndexDirError, match=r"has no index 'nope'; build it with `dynrag index CORPUS --engine opensearch"):
        open_retriever("opensearch", None, {"url": opensearch_url, "index": "nope"}, work_dir=tmp_path)
    for args, message in (
        (["ask", "Who founded the festival?", "--retriever", "opensearch", "--retriever-option",
          "url=http://127.0.0.1:9,index=demo"], "cannot reach OpenSearch at http://127.0.0.1:9"),
        (["ask", "Who founded the festival?", "--retriever", "opensearch", "--retriever-option",
          f"url={opensearch_url},index=nope"], "has no index 'nope'"),
        (["index", str(demo_passages_path()), "--engine", "opensearch", "--url", "http://127.0.0.1:9"],
         "cannot reach OpenSearch at http://127.0.0.1:9"),
    ):
        done = run_in_process(*args)
        assert done.returncode == 1 and message in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr  # one line, no traceback
