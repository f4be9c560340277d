import hashlib
import json
from pathlib import Path

import bm25s
import numpy as np
import pytest
import Stemmer
from bm25s.tokenization import Tokenizer

from dynrag.corpus import Passage
from dynrag.errors import DynragError, IndexDirError
from dynrag.retrieval import BM25Index, Hit, Retriever
from dynrag.retrieval import bm25_build
from dynrag.retrieval.tokenizer import BM25Tokenizer
from dynrag.text.chunking import parse_chunk_spec

CORPUS = [
    Passage("rush", "Rush (band)", "Rush was a Canadian rock band formed in Toronto in 1968."),
    Passage("peart", "Neil Peart", "Neil Peart was the drummer and lyricist of the band Rush."),
    Passage("paris", "Paris", "Paris is the capital and most populous city of France."),
    Passage("berlin", "Berlin", "Berlin is the capital and largest city of Germany."),
    Passage("bees", "Honey bee", "Honey bees are eusocial flying insects within the genus Apis."),
    Passage("quotes", 'The "Quoted" Title', 'He said "hello"\\back\nslash\ttab and left.'),
    Passage("unicode", "Zürich", "Zürich — the largest city in Switzerland — sits on a lake."),
    Passage("eiffel", "Eiffel Tower", "A wrought-iron lattice tower on the Champ de Mars."),
    Passage("empty", "", ""),
]


def build(passages, out: Path, **kw) -> dict:
    return BM25Index.build(passages, out, progress=False, **kw)


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bm25") / "index"
    build(CORPUS, out)
    return out


@pytest.fixture(scope="module")
def index(index_dir):
    with BM25Index.load(index_dir, backend="numpy") as idx:
        yield idx


def test_relevant_passage_ranks_first(index):
    assert isinstance(index, Retriever)
    hits = index.search("Which Canadian rock band had a drummer?", k=3)
    assert hits[0].id == "rush"
    assert {h.id for h in hits} == {"rush", "peart"}  # nothing else shares a term
    assert hits[0] == Hit("rush", CORPUS[0].title, CORPUS[0].text, hits[0].score)
    capital = index.search("capital of Germany", k=2)
    assert [h.id for h in capital] == ["berlin", "paris"]
    assert capital[0].score > capital[1].score > 0


def test_stemming_and_title_are_indexed(index):
    assert index.search("drummers", k=1)[0].id == "peart"  # drummer/drummers share a stem
    assert index.search("Eiffel", k=3)[0].id == "eiffel"  # the word is only in the title
    assert index.search("ZÜRICH", k=1)[0].id == "unicode"


def test_text_with_escapes_round_trips(index):
    hit = index.search("hello back slash tab", k=1)[0]
    assert (hit.id, hit.title, hit.text) == ("quotes", CORPUS[5].title, CORPUS[5].text)
    uni = index.search("Switzerland lake", k=1)[0]
    assert uni.text == CORPUS[6].text
    assert [index.passage(i) for i in range(len(index))] == CORPUS


def test_lone_surrogates_survive(tmp_path):
    odd = Passage("odd\ud800", "t", "broken \udc00 surrogate text")
    build([odd, CORPUS[0]], tmp_path / "idx")
    with BM25Index.load(tmp_path / "idx", backend="numpy") as idx:
        hit = idx.search("surrogate", k=1)[0]
        assert (hit.id, hit.text) == (odd.id, odd.text)
        assert idx.passage(0) == odd


def test_k_is_clamped_and_stopword_queries_return_nothing(index):
    assert len(index) == len(CORPUS)
    hits = index.search("city", k=100)
    assert {h.id for h in hits} == {"paris", "berlin", "unicode"}
    assert index.search("the and of a is", k=5) == []
    assert index.search("", k=5) == []
    assert index.search("xylophone", k=5) == []
    assert index.search("Paris", k=0) == []


def test_search_batch_matches_single_searches_and_is_sorted(index):
    queries = ["rock band Toronto", "the of", "honey insects", "capital city", "Zürich lake"]
    batch = index.search_batch(queries, k=4)
    assert batch == [index.search(q, k=4) for q in queries]
    assert batch[1] == []
    for hits in batch:
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
    assert index.search_batch([], k=3) == []


def test_score_matrix_blocks_cut_at_any_term():
    # postings per term: 10, 1, 1, 1, 10, 1, 0, 2 (term ids follow first appearance, so the big
    # ones come first in a real corpus); a block holds at most 3 postings or one bigger term
    indptr = np.cumsum([0, 10, 1, 1, 1, 10, 1, 0, 2])
    assert bm25_build._blocks(indptr, 3).tolist() == [0, 1, 4, 5, 8]
    assert bm25_build._blocks(indptr, 100).tolist() == [0, 8]
    assert bm25_build._blocks(indptr, 1).tolist() == [0, 1, 2, 3, 4, 5, 7, 8]
    assert bm25_build._blocks(np.zeros(1, np.int64), 3).tolist() == [0]


def test_manifest_and_files(index, index_dir):
    m = index.manifest
    assert m["format"] == "dynrag-bm25" and m["format_version"] == 1
    assert m["passage_count"] == len(CORPUS)
    assert m["tokenizer"] == {"stemmer": "english", "stopwords": "en", "lowercase": True}
    assert m["dynrag_version"] and m["created"]
    written = (index_dir / "passages.jsonl").read_bytes()
    assert m["corpus_sha256"] == hashlib.sha256(written).hexdigest()
    assert json.loads((index_dir / "manifest.json").read_text()) == m
    assert [json.loads(line)["id"] for line in written.splitlines()] == [p.id for p in CORPUS]
    for npy in index_dir.glob("*.npy"):
        np.load(npy, allow_pickle=False)  # raises if anything was pickled
    assert not list(index_dir.glob("*.pkl")) and not list(index_dir.glob("*.pickle"))
    index.verify()


@pytest.mark.parametrize("block", [1 << 22, 5, 1])  # one block; many blocks of few terms; one term each
def test_tokens_and_scores_match_bm25s(tmp_path, monkeypatch, block):
    # The index computes bm25s's score matrix itself, batch by batch, and writes it to disk a block
    # of terms at a time; it must equal bm25s's own, files included.
    monkeypatch.setattr(bm25_build, "_BATCH_PASSAGES", 7)  # several batches and posting runs
    monkeypatch.setattr(bm25_build, "_BLOCK_POSTINGS", block)
    extra = [
        Passage(str(i), f"T{i}", f"Word{i % 3} repeated repeated, A. b c's_x {i}-{i} naïve café")
        for i in range(30)
    ]
    corpus = CORPUS + extra
    texts = [f"{p.title}\n{p.text}" for p in corpus]
    tok = Tokenizer(lower=True, stopwords="en", stemmer=Stemmer.Stemmer("english"))
    ids = tok.tokenize(texts, update_vocab=True, return_as="ids", show_progress=False)
    raw = bm25s.BM25()
    raw.index((ids, tok.stem_to_sid), show_progress=False)

    mine = BM25Tokenizer(None, grow=True)
    flat, lengths = mine.corpus_batch(texts)
    assert mine.stem_to_id == tok.stem_to_sid
    assert [a.tolist() for a in np.split(flat, np.cumsum(lengths)[:-1])] == ids

    build(corpus, tmp_path / "idx")
    idx = BM25Index.load(tmp_path / "idx", backend="numpy")
    scores = idx._bm25.scores
    np.testing.assert_array_equal(scores["indptr"], raw.scores["indptr"])
    np.testing.assert_array_equal(scores["indices"], raw.scores["indices"])
    np.testing.assert_allclose(scores["data"], raw.scores["data"], rtol=1e-6, atol=0)
    raw.save(tmp_path / "raw")
    for name in ("vocab.index.json", "params.index.json"):
        assert json.loads((tmp_path / "idx" / name).read_text()) == json.loads((tmp_path / "raw" / name).read_text())

    queries = ["repeated word1", "capital city", "café naïve", "c's_x"]
    qids = tok.tokenize(queries, update_vocab=False, return_as="ids", show_progress=False)
    docs, raw_scores = raw.retrieve(qids, k=5, show_progress=False)
    for q, d, s in zip(queries, docs, raw_scores):
        hits = idx.search(q, k=5)
        assert [h.score for h in hits] == pytest.approx([x for x in s.tolist() if x > 0])
        assert {corpus[i].id for i, x in zip(d, s) if x > 0} == {h.id for h in hits}
    idx.close()


def test_chunking_during_build(tmp_path):
    long = Passage("long", "L", " ".join(f"w{i}" for i in range(10)) + " zebra")
    tiny = Passage("tiny", "", "tiny text")
    m = build([long, tiny], tmp_path / "idx", chunk=parse_chunk_spec("tokens:4:1"))
    assert m["chunk"] == "tokens:4:1"
    with BM25Index.load(tmp_path / "idx", backend="numpy") as idx:
        assert [idx.passage(i).id for i in range(len(idx))] == [
            "long#0", "long#1", "long#2", "long#3", "tiny",
        ]
        assert idx.search("zebra", k=1)[0].id == "long#3"


# ---- loading errors --------------------------------------------------------------------------


def assert_index_error(path: Path, match: str) -> None:
    with pytest.raises(IndexDirError, match=match) as e:
        BM25Index.load(path, backend="numpy")
    msg = str(e.value)
    assert str(path) in msg and "dynrag index" in msg and "\n" not in msg


def test_load_missing_dir(tmp_path):
    assert_index_error(tmp_path / "nowhere", "no such index directory")


def copy_index(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def test_load_corrupt_manifests(index_dir, tmp_path):
    d = copy_index(index_dir, tmp_path / "copy")
    manifest = json.loads((d / "manifest.json").read_text())

    (d / "manifest.json").write_text("{not json")
    assert_index_error(d, "manifest.json:1: not valid JSON: expecting property name")

    (d / "manifest.json").write_text(json.dumps({**manifest, "format_version": 99}))
    assert_index_error(d, "version 99")

    (d / "manifest.json").write_text(json.dumps({**manifest, "format": "other"}))
    assert_index_error(d, "format")

    (d / "manifest.json").write_text(json.dumps({**manifest, "passage_count": 3}))
    assert_index_error(d, "manifest says 3")

    (d / "manifest.json").unlink()
    assert_index_error(d, "manifest.json missing")


def test_load_truncated_passages(index_dir, tmp_path):
    d = copy_index(index_dir, tmp_path / "copy")
    data = (d / "passages.jsonl").read_bytes()
    (d / "passages.jsonl").write_bytes(data[:-10])
    assert_index_error(d, "passages.jsonl")
    (d / "passages.jsonl").write_bytes(data)
    (d / "data.csc.index.npy").unlink()
    assert_index_error(d, "bm25s files unreadable")


# ---- crash safety ----------------------------------------------------------------------------


def snapshot(d: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(d.iterdir())}


def test_failed_build_leaves_previous_index_untouched(tmp_path):
    out = tmp_path / "idx"
    build(CORPUS, out)
    before = snapshot(out)

    def exploding():
        yield Passage("new1", "", "brand new passage")
        yield Passage("new2", "", "another one")
        raise RuntimeError("source died mid-stream")

    with pytest.raises(RuntimeError, match="mid-stream"):
        build(exploding(), out)
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]  # no temp dirs left
    with BM25Index.load(out, backend="numpy") as idx:
        assert idx.search("Canadian rock band", k=1)[0].id == "rush"


def test_rebuild_replaces_index_and_cleans_up(tmp_path):
    out = tmp_path / "idx"
    build(CORPUS, out)
    build([Passage("only", "", "a single fresh passage")], out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]
    with BM25Index.load(out, backend="numpy") as idx:
        assert len(idx) == 1
        assert idx.search("fresh", k=5)[0].id == "only"
        assert idx.search("Canadian", k=5) == []


def test_build_refuses_to_replace_other_directories(tmp_path):
    precious = tmp_path / "home"
    precious.mkdir()
    (precious / "thesis.tex").write_text("do not delete")
    with pytest.raises(IndexDirError, match="not a dynrag BM25 index"):
        build(CORPUS, precious)
    assert (precious / "thesis.tex").read_text() == "do not delete"
    a_file = tmp_path / "notes.txt"
    a_file.write_text("keep")
    with pytest.raises(DynragError, match=f"{a_file}: exists and is not a directory"):
        build(CORPUS, a_file)
    assert a_file.read_text() == "keep"
    empty = tmp_path / "empty"
    empty.mkdir()
    build(CORPUS[:2], empty)  # an empty directory is fine
    assert (empty / "manifest.json").exists()


def test_empty_corpus_is_an_error(tmp_path):
    with pytest.raises(DynragError, match="no passages"):
        build([], tmp_path / "idx")
    assert not (tmp_path / "idx").exists()


def test_unknown_backend(index_dir):
    with pytest.raises(DynragError, match="backend"):
        BM25Index.load(index_dir, backend="gpu")  # type: ignore[arg-type]


def test_auto_backend_picks_numba_when_importable(index_dir):
    pytest.importorskip("numba")
    with BM25Index.load(index_dir) as idx:  # no search here: numba compiles on the first one
        assert idx.backend == "numba"


@pytest.mark.slow  # numba compiles bm25s's retrieval kernel on first use: ~6 s
def test_numba_backend_gives_the_same_hits(index_dir, index):
    pytest.importorskip("numba")
    with BM25Index.load(index_dir, backend="auto") as fast:  # numba compiles on first search
        assert fast.backend == "numba"
        queries = ["rock band drummer", "capital city", "the of", "honey"]
        assert fast.search_batch(queries, k=3) == index.search_batch(queries, k=3)


def test_search_rows_batch_matches_search_batch_without_reading_passages(index):
    queries = ["rock band Toronto", "the of and", "capital city", "xylophone"]
    rows, scores = index.search_rows_batch(queries, 4)
    assert rows.shape == scores.shape == (4, 4)
    hits = index.search_batch(queries, 4)
    for qi, query_hits in enumerate(hits):
        matched = rows[qi][rows[qi] >= 0]
        assert [index.passage(int(r)).id for r in matched] == [h.id for h in query_hits]
        assert scores[qi][: len(matched)].tolist() == pytest.approx([h.score for h in query_hits])
        assert (scores[qi][len(matched):] == 0).all() and (rows[qi][len(matched):] == -1).all()
    assert (rows[1] == -1).all() and (rows[3] == -1).all()  # stopwords only; unknown word
    assert (rows[0] >= 0).sum() >= 1 and (rows[2] >= 0).sum() >= 2
    assert (np.diff(scores[2]) <= 0).all()


def eager(hit) -> Hit:
    """The Hit the search would have built up front: strings read from the corpus itself."""
    p = next(p for p in CORPUS if p.id == hit.id)
    return Hit(p.id, p.title, p.text, hit.score)


def test_lazy_hits_equal_eager_hits_in_every_way(index):
    import copy
    import dataclasses
    import pickle

    queries = ["Which Canadian rock band had a drummer?", "capital of Germany", "hello back slash tab",
               "Switzerland lake", "Zürich"]
    for hits in index.search_batch(queries, 4):
        for hit in hits:
            want = eager(hit)
            assert isinstance(hit, Hit) and hit == want and want == hit and hash(hit) == hash(want)
            assert (hit.id, hit.title, hit.text, hit.score) == (want.id, want.title, want.text, want.score)
            assert hit.to_dict() == want.to_dict() and dataclasses.asdict(hit) == dataclasses.asdict(want)
            assert {hit, want} == {want} and repr(hit).endswith(repr(want)[len("Hit"):])
            again = dataclasses.replace(hit, score=1.5)
            assert again == Hit(want.id, want.title, want.text, 1.5)
            for copied in (copy.copy(hit), copy.deepcopy(hit), pickle.loads(pickle.dumps(hit))):
                assert type(copied) is Hit and copied == want
            with pytest.raises(dataclasses.FrozenInstanceError):
                hit.text = "changed"  # type: ignore[misc]
    assert index.search("capital of France", k=1)[0] != Hit("paris", "Paris", "another text", 1.0)


def test_lazy_hits_read_their_text_after_the_index_is_closed(index_dir):
    with BM25Index.load(index_dir, backend="numpy") as idx:
        unread = idx.search_batch(["capital of Germany", "hello back slash tab"], 2)
    assert [[eager(h) for h in hits] for hits in unread] == unread
    assert unread[1][0].text == CORPUS[5].text  # escapes decoded after close too
