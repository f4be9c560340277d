"""`dynrag index --add-contexts DATASET=FILE`: a benchmark's paragraphs that the corpus lacks join it once."""

import json

from dynrag.retrieval.bm25 import BM25Index
from tests.cli.test_cli_errors import assert_one_line_error
from tests.cli_inprocess import run_in_process as dynrag
from tests.eval import fixtures as fx


def corpus(tmp_path):
    path = tmp_path / "wiki.jsonl"
    rows = [{"id": "w1", "title": "Paris", "text": "Paris is  the capital\nof France."},  # h1's Paris, other spacing
            {"id": "w2", "title": "Oslo", "text": "Oslo is the capital of Norway."}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_the_paragraphs_the_corpus_lacks_are_indexed_once_beside_it(tmp_path):
    dev = fx.write_json(tmp_path / "train.json", fx.HOTPOT)
    out = tmp_path / "index"
    r = dynrag("index", corpus(tmp_path), "--out", out, "--add-contexts", f"hotpotqa={dev}",
               "--add-contexts", f"hotpotqa={dev}", "--no-progress")  # the same file twice adds nothing more
    assert r.returncode == 0, r.stderr
    index = BM25Index.load(out)
    titles = sorted(index.passage(i).title for i in range(len(index)))
    assert titles == ["Lyon", "Oslo", "Paris", "Velmora bridge"]  # Paris kept as the corpus's, Lyon once
    assert "adding 2 context paragraphs" in r.stdout
    assert index.search("Which river flows through Lyon", 1)[0].title == "Lyon"
    manifest = json.loads((out / "manifest.json").read_text())
    assert [s["path"] for s in manifest["sources"]["added_contexts"]] == [str(dev.absolute())] * 2
    from dynrag.corpus.readers import changed_sources

    assert changed_sources(manifest["sources"]) == []
    dev.write_text(dev.read_text() + " ", encoding="utf-8")  # the train file changes after the build
    assert changed_sources(manifest["sources"]) == [f"{dev.name}: {dev.stat().st_size - 1:,} -> {dev.stat().st_size:,} bytes"] * 2


def test_a_bad_pair_or_dataset_is_one_line_naming_it(tmp_path):
    path = corpus(tmp_path)
    r = dynrag("index", path, "--out", tmp_path / "i", "--add-contexts", "hotpotqa")
    assert_one_line_error(r, "--add-contexts 'hotpotqa'", "DATASET=FILE")
    r = dynrag("index", path, "--out", tmp_path / "i", "--add-contexts", f"nosuch={path}")
    assert_one_line_error(r, "nosuch", "hotpotqa")
    assert not (tmp_path / "i").exists()  # nothing written
