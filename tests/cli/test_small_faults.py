"""Smaller faults, each a clear error or warning, through the real CLI.

Before: k=0 and negative k were accepted; duplicate passage ids were indexed silently; an index
served its old passages after the corpus changed, without a word; "nothing to index" named no
file and no reason; a TSV decode error on line 2 was reported on line 1; a params.index.json of
the wrong type gave a traceback; `hf:/nonexistent` said "Repo id must use alphanumeric chars"; an
empty hf: directory's message was cut off; `--data DIR` said "no such file".
"""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.cli.test_cli_errors import assert_one_line_error
from tests.cli_inprocess import run_in_process as dynrag  # what a user sees, without an interpreter start


def jsonl(path, *rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    root = tmp_path_factory.mktemp("small")
    corpus = jsonl(root / "corpus.jsonl", {"id": "a", "title": "A", "text": "the alpha bridge spans the river"})
    assert dynrag("index", corpus, "--out", root / "idx").returncode == 0
    return root / "idx"


@pytest.mark.parametrize("k", ["0", "-3"])
def test_k_below_one_is_refused_by_ask_and_eval(tmp_path, index, k):
    r = dynrag("ask", "Who?", "--corpus", index, "--option", f"k={k}")
    assert_one_line_error(r, f"--option k of method 'single': must be at least 1 (got {k})")
    data = jsonl(tmp_path / "qa.jsonl", {"id": "q", "question": "Who?", "answers": ["x"]})
    r = dynrag("eval", "--dataset", "jsonl", "--data", data, "--method", "single", "--corpus", "contexts",
               "--option", f"k={k}", "--out", tmp_path / "run")
    assert_one_line_error(r, f"--option k of method 'single': must be at least 1 (got {k})")
    assert not (tmp_path / "run").exists()


def test_duplicate_passage_ids_are_an_error_naming_the_id_and_both_passages(tmp_path):
    corpus = jsonl(tmp_path / "dup.jsonl", {"id": "a", "text": "one"}, {"id": "b", "text": "two"},
                   {"id": "a", "text": "three"})
    r = dynrag("index", corpus, "--out", tmp_path / "idx")
    assert_one_line_error(r, str(corpus), "duplicate passage id 'a'", "passages 1 and 3")
    assert not (tmp_path / "idx").exists()


def test_a_corpus_changed_after_indexing_is_warned_about(tmp_path):
    from tests.tiny_models import save_tiny_llama

    model = f"hf:{save_tiny_llama(tmp_path / 'tiny')}"
    corpus = jsonl(tmp_path / "c.jsonl", {"id": "a", "title": "A", "text": "the alpha bridge"})
    out = tmp_path / "idx"
    assert dynrag("index", corpus, "--out", out).returncode == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sources"]["files"][0]["size"] == corpus.stat().st_size
    ask = ["ask", "alpha?", "--corpus", out, "--model", model, "--option", "max_new_tokens=2"]
    r = dynrag(*ask)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    time.sleep(0.01)
    jsonl(corpus, {"id": "a", "title": "A", "text": "the alpha bridge"}, {"id": "b", "text": "new"})
    r = dynrag(*ask)
    assert r.returncode == 0, r.stderr
    said = " ".join(r.stderr.split())
    assert f"warning: {out} was built from {corpus}, which has changed since" in said
    assert "c.jsonl:" in said and "bytes" in said and "rebuild with `dynrag index" in said


def test_a_changed_folder_corpus_names_the_files(tmp_path):
    from dynrag.corpus import changed_sources, source_stamps

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\nalpha")
    (folder / "b.txt").write_text("beta")
    stamps = source_stamps(folder)
    assert changed_sources(stamps) == []
    (folder / "b.txt").unlink()
    (folder / "c.md").write_text("gamma")
    time.sleep(0.01)
    (folder / "a.md").write_text("# A\nalpha, longer now")
    assert sorted(changed_sources(stamps)) == sorted(["a.md: 9 -> 21 bytes", "b.txt removed", "c.md added"])


@pytest.mark.parametrize("case", ["empty", "blank", "header", "folder", "dir-named-jsonl", "empty-files"])
def test_nothing_to_index_names_the_source_and_the_reason(tmp_path, case):
    if case == "empty":
        source, reason = tmp_path / "c.jsonl", "the file is empty"
        source.write_text("")
    elif case == "blank":
        source, reason = tmp_path / "c.jsonl", "only blank lines"
        source.write_text("\n  \n\n")
    elif case == "header":
        source, reason = tmp_path / "c.tsv", "a header row and no rows"
        source.write_text("id\ttext\ttitle\n")
    elif case == "folder":
        source, reason = tmp_path / "docs", "a folder with no .txt or .md files (it holds a.pdf)"
        source.mkdir()
        (source / "a.pdf").write_bytes(b"%PDF")
    elif case == "dir-named-jsonl":
        source, reason = tmp_path / "x.jsonl", "x.jsonl is a folder, not a .jsonl file"
        source.mkdir()
    else:
        source, reason = tmp_path / "docs", "every .txt/.md file in the folder is empty"
        source.mkdir()
        (source / "a.txt").write_text("   \n")
    r = dynrag("index", source, "--out", tmp_path / "idx")
    assert_one_line_error(r, str(source), "nothing to index", reason)


def test_a_tsv_decode_error_names_its_own_line(tmp_path):
    source = tmp_path / "c.tsv"
    source.write_bytes(b"id\ttext\ttitle\n1\tfine\tT\n2\tbad \xff byte\tT\n3\tfine\tT\n")
    r = dynrag("index", source, "--out", tmp_path / "idx")
    assert_one_line_error(r, f"{source}:3:", "not UTF-8")


@pytest.mark.parametrize("content", ["[]", '"text"', "3", "{broken"])
def test_a_params_index_json_of_the_wrong_type_is_an_index_error(tmp_path, index, content):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(index, broken)
    (broken / "params.index.json").write_text(content)
    r = dynrag("ask", "alpha?", "--corpus", broken, "--method", "single")
    assert_one_line_error(r, str(broken), "params.index.json", "rebuild it with `dynrag index")


def test_hf_model_specs_say_what_is_wrong(tmp_path, monkeypatch):
    from dynrag.errors import ConfigError
    from dynrag.lm.loader import check_model_spec

    def message(spec):
        with pytest.raises(ConfigError) as info:
            check_model_spec(spec)
        return str(info.value)

    assert "no such directory /nonexistent" in message("hf:/nonexistent") and "Repo id" not in message("hf:/nonexistent")
    (tmp_path / "empty").mkdir()
    said = message(f"hf:{tmp_path / 'empty'}")
    assert "is an empty directory" in said and said.endswith("the tokenizer files")  # not cut off
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "model.safetensors").write_bytes(b"x")
    assert "has no config.json" in message(f"hf:{tmp_path / 'weights'}")
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    assert f"hf:{tmp_path}#m.gguf" in message(f"hf:{tmp_path / 'm.gguf'}")
    assert "no such GGUF file" in message(f"hf:{tmp_path}#other.gguf")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # online, an uncached id passes the check and downloads on load
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    said = message("hf:no-such-org/no-such-model-xyz")
    assert "not in the local Hugging Face cache" in said and "HF_HUB_OFFLINE=1" in said
    r = dynrag("ask", "Who?", "--method", "direct", "--model", f"hf:{tmp_path / 'empty'}")
    assert_one_line_error(r, "is an empty directory", "the tokenizer files")


def test_data_pointing_to_a_directory_says_so(tmp_path):
    r = dynrag("eval", "--dataset", "jsonl", "--data", tmp_path, "--method", "direct", "--out", tmp_path / "run")
    assert_one_line_error(r, str(tmp_path), "is a directory", "benchmark file")
    r = dynrag("eval-retrieval", "--dataset", "hotpotqa", "--data", tmp_path, "--out", tmp_path / "r")
    assert_one_line_error(r, str(tmp_path), "is a directory")
    assert os.listdir(tmp_path) == []


def test_a_corpus_touched_but_not_changed_is_not_called_changed(tmp_path):
    """A copy or a remount changes a file's time alone: its recorded sha256 shows nothing changed,
    while a same-size edit is still caught; a manifest without hashes keeps the time rule."""
    import os

    from dynrag.corpus import changed_sources, source_stamps

    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "alpha"}\n')
    stamps = source_stamps(corpus)
    assert len(stamps["files"][0]["sha256"]) == 64
    later = stamps["files"][0]["mtime_ns"] + 5_000_000_000
    os.utime(corpus, ns=(later, later))
    assert changed_sources(stamps) == []
    corpus.write_text('{"id": "a", "text": "omega"}\n')  # same size, other content
    os.utime(corpus, ns=(later, later))
    assert changed_sources(stamps) == ["c.jsonl modified"]
    unhashed = {**stamps, "files": [{k: v for k, v in stamps["files"][0].items() if k != "sha256"}]}
    corpus.write_text('{"id": "a", "text": "alpha"}\n')
    os.utime(corpus, ns=(later, later))
    assert changed_sources(unhashed) == ["c.jsonl modified"]
