"""Small-to-big retrieval over real indexes: the retriever on its own, an index built with
``--chunk small-to-big``, and the factory wrapping any retriever over such an index."""

import json

import pytest
from typer.testing import CliRunner

from dynrag.cli import app
from dynrag.corpus import Passage
from dynrag.errors import IndexDirError
from dynrag.retrieval import BM25Index, Hit, Retriever
from dynrag.retrieval.factory import open_retriever
from dynrag.retrieval.small_to_big import PARENTS_FILE, SmallToBigRetriever, load_parents
from dynrag.text.chunking import parse_chunk_spec, small_chunk_parent, small_chunks_keeping_large
from tests.fakes import FakeRetriever
from tests.text.test_chunking_strategies import words


def split(docs, spec: str) -> tuple[list[Passage], dict[str, Passage]]:
    """(small chunks, {large id: large chunk}) of ``docs`` chunked by ``spec``."""
    larges: dict[str, Passage] = {}
    smalls = list(small_chunks_keeping_large(docs, parse_chunk_spec(spec), lambda p: larges.setdefault(p.id, p)))
    return smalls, larges


def test_small_to_big_retriever_over_real_bm25(tmp_path):
    # Two long documents; each fact sits in one small window of a large chunk.
    filler = words(40, "pad")
    docs = [
        Passage("river", "Rivers", f"{filler} the Rhone flows through Lyon {words(40, 'zz')}"),
        Passage("bridge", "Bridges", f"{words(30, 'qq')} the Velmora bridge spans the Rhone {filler}"),
    ]
    smalls, larges = split(docs, "small-to-big:10:50:2")
    BM25Index.build(smalls, tmp_path / "small", progress=False)
    with BM25Index.load(tmp_path / "small", backend="numpy") as small_index:
        s2b = SmallToBigRetriever(small_index, larges, fanout=1)
        assert isinstance(s2b, Retriever)
        hits = s2b.search("Where does the Rhone flow through Lyon?", k=2)
        top = hits[0]
        assert top.id in larges and "Rhone flows through Lyon" in top.text
        assert top.text == larges[top.id].text and top.title == "Rivers"
        # Its score is that of its best small chunk.
        best_small = small_index.search("Where does the Rhone flow through Lyon?", k=1)[0]
        assert small_chunk_parent(best_small.id) == top.id and top.score == pytest.approx(best_small.score)
        # Distinct parents, even though several small chunks of one parent match "Rhone".
        assert len({h.id for h in hits}) == len(hits) == 2
        assert "Velmora" in s2b.search("Velmora bridge", k=1)[0].text


def test_small_to_big_widens_the_search_until_k_parents():
    # many small chunks of one parent come before any other parent
    small = FakeRetriever([Hit(f"A/s{i}", "", "", 10.0 - i) for i in range(8)] + [Hit("B/s0", "", "", 1.0)])
    parents = {"A": Passage("A", "TA", "big A"), "B": Passage("B", "TB", "big B")}
    s2b = SmallToBigRetriever(small, parents.get, fanout=2, max_fanout=64)
    hits = s2b.search("q", 2)
    assert [(x.id, x.text, x.score) for x in hits] == [("A", "big A", 10.0), ("B", "big B", 1.0)]
    assert small.asked == [4, 16]  # 4 hits gave one parent; 16 reached both
    small.asked.clear()
    assert [x.id for x in s2b.search("q", 5)] == ["A", "B"]  # corpus exhausted: fewer than k
    assert small.asked == [10]


def long_docs():
    filler = words(40, "pad")
    return [
        Passage("river", "Rivers", f"{filler} the Rhone flows through Lyon {words(40, 'zz')}"),
        Passage("bridge", "Bridges", f"{words(30, 'qq')} the Velmora bridge spans the Rhone {filler}"),
    ]


def test_an_index_built_small_to_big_keeps_the_large_chunks(tmp_path):
    spec = parse_chunk_spec("small-to-big:10:50:2")
    manifest = BM25Index.build(long_docs(), tmp_path / "idx", progress=False, chunk=spec)
    smalls, larges = split(long_docs(), "small-to-big:10:50:2")
    assert manifest["chunk"] == "small-to-big:10:50:2" and manifest["passage_count"] == len(smalls)
    assert load_parents(tmp_path / "idx") == larges
    with BM25Index.load(tmp_path / "idx", backend="numpy") as index:
        assert [index.passage(i).id for i in range(len(index))] == [s.id for s in smalls]


def test_every_retriever_over_a_small_to_big_index_returns_large_chunks(tmp_path):
    BM25Index.build(long_docs(), tmp_path / "idx", progress=False, chunk=parse_chunk_spec("small-to-big:10:50:2"))
    larges = load_parents(tmp_path / "idx")
    for name, options in [("bm25", {"backend": "numpy"}), ("hybrid", {"bm25_backend": "numpy"})]:
        retriever = open_retriever(name, tmp_path / "idx", options, work_dir=tmp_path, progress=False)
        try:
            assert isinstance(retriever, SmallToBigRetriever)
            hits = retriever.search("Where does the Rhone flow through Lyon?", 2)
            assert hits[0].id in larges and "Rhone flows through Lyon" in hits[0].text
            assert len({h.id for h in hits}) == 2
        finally:
            retriever.close()
    # a plain index is not wrapped
    BM25Index.build(long_docs(), tmp_path / "plain", progress=False)
    plain = open_retriever("bm25", tmp_path / "plain", {"backend": "numpy"}, work_dir=tmp_path)
    assert isinstance(plain, BM25Index)
    plain.close()


def test_a_small_to_big_index_without_its_large_chunks_is_a_clear_error(tmp_path):
    BM25Index.build(long_docs(), tmp_path / "idx", progress=False, chunk=parse_chunk_spec("small-to-big:10:50"))
    (tmp_path / "idx" / PARENTS_FILE).write_text('{"id": "river#0"}\n')
    with pytest.raises(IndexDirError, match=r"parents.jsonl:1: not a passage record"):
        open_retriever("bm25", tmp_path / "idx", {}, work_dir=tmp_path)
    (tmp_path / "idx" / PARENTS_FILE).unlink()
    with pytest.raises(IndexDirError, match="without parents.jsonl; rebuild it"):
        open_retriever("bm25", tmp_path / "idx", {}, work_dir=tmp_path)


def test_index_command_builds_small_to_big(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": p.id, "title": p.title, "text": p.text}) + "\n" for p in long_docs()))
    r = CliRunner().invoke(app, ["index", str(corpus), "--out", str(tmp_path / "idx"), "--chunk", "small-to-big:10:50:2"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "idx" / PARENTS_FILE).is_file()
    r = CliRunner().invoke(app, ["index", str(corpus), "--out", str(tmp_path / "bad"), "--chunk", "small-to-big:50:10"])
    assert r.exit_code == 1 and "must not be smaller than small ones" in r.output
