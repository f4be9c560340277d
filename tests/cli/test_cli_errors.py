"""Bad input on the command line: one line naming the input, a non-zero exit, no traceback."""

import json
import subprocess
import sys

import pytest

from tests.cli_inprocess import run_in_process as dynrag  # what a user sees, without an interpreter start

from dynrag.corpus.passage import Passage
from dynrag.retrieval.bm25 import BM25Index
from tests.waiting import HANG_GUARD_S


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "index"
    BM25Index.build([Passage("a", "Alpha", "The alpha bridge spans the river.")], out, progress=False)
    return out


def assert_one_line_error(result, *needles):
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    # Progress bars may come first; the error is the last thing said, on its own line.
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    start = max(i for i, line in enumerate(lines) if line.startswith("error:"))
    text = " ".join(lines[start:])  # rich may wrap a long line
    for needle in needles:
        assert needle in text, (needle, result.stderr)
    return text


def test_missing_index(tmp_path):
    r = dynrag("ask", "Who?", "--corpus", str(tmp_path / "nope"))
    assert_one_line_error(r, str(tmp_path / "nope"))


def test_corrupt_index(tmp_path, index_dir):
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in index_dir.iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    (broken / "manifest.json").write_text("{not json")
    r = dynrag("ask", "Who?", "--corpus", str(broken))
    assert_one_line_error(r, "manifest")


def test_malformed_jsonl_names_file_and_line(tmp_path):
    src = tmp_path / "corpus.jsonl"
    src.write_text('{"id": "1", "title": "A", "text": "fine"}\n{"id": "2", "title": oops}\n')
    r = dynrag("index", str(src), "--out", str(tmp_path / "idx"))
    assert_one_line_error(r, f"{src}:2")
    assert not (tmp_path / "idx").exists()


def test_failed_rebuild_keeps_the_previous_index(tmp_path, index_dir):
    out = tmp_path / "idx"
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"id": "1", "title": "A", "text": "the alpha bridge"}) + "\n")
    assert dynrag("index", str(good), "--out", str(out)).returncode == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "1", "title": "A", "text": "x"}) + "\n{broken\n")
    assert dynrag("index", str(bad), "--out", str(out)).returncode != 0
    assert len(BM25Index.load(out)) == 1


def test_empty_question(index_dir):
    assert_one_line_error(dynrag("ask", "   ", "--corpus", str(index_dir)), "question is empty")


def test_unknown_method_lists_choices(index_dir):
    r = dynrag("ask", "Who?", "--corpus", str(index_dir), "--method", "magic")
    assert_one_line_error(r, "magic", "dragin", "single", "direct")


def test_unknown_model_spec_lists_forms(index_dir):
    r = dynrag("ask", "Who?", "--corpus", str(index_dir), "--model", "gpt-9")
    assert_one_line_error(r, "gpt-9", "bundled:smollm2", "hf:")


def test_unknown_option_lists_valid_ones(index_dir):
    r = dynrag("ask", "Who?", "--corpus", str(index_dir), "--method", "flare", "--option", "tehta=0.1")
    assert_one_line_error(r, "tehta", "theta")


def test_unreadable_corpus_file(tmp_path):
    missing = tmp_path / "missing.jsonl"
    assert_one_line_error(dynrag("index", str(missing), "--out", str(tmp_path / "i")), str(missing))


def test_debug_shows_the_traceback(index_dir):
    r = dynrag("--debug", "ask", "   ", "--corpus", str(index_dir))
    assert r.returncode != 0 and "Traceback" in r.stderr


def test_reproduce_unknown_table_and_missing_data(tmp_path):
    assert_one_line_error(dynrag("reproduce", "deeprag-table9"), "deeprag-table9", "dragin-table2")
    assert_one_line_error(dynrag("reproduce", "dragin-table2", "--data", f"hotpotqa={tmp_path / 'nope.json'}"),
                          "nope.json", "no such file")
    shown = dynrag("reproduce", "dragin-table3", "--no-run", "--write", str(tmp_path / "t3.md"))
    assert shown.returncode == 0, shown.stderr
    assert "| DRAGIN | – | 3.50 | – |" in shown.stdout and "no data: give --data hotpotqa=PATH" in shown.stdout
    assert (tmp_path / "t3.md").read_text() == shown.stdout


def test_a_question_that_is_not_utf8_is_one_line_naming_it(index_dir):
    # A byte that is not UTF-8 reaches Python's argv as a lone surrogate (\udcff).
    r = subprocess.run([sys.executable, "-m", "dynrag.cli", "ask", b"Who founded \xff?", "--corpus", str(index_dir),
                        "--method", "direct"], capture_output=True, text=True, timeout=HANG_GUARD_S)
    text = assert_one_line_error(r, "the question cannot be encoded as UTF-8", "character 13", "\\udcff")
    assert "loading model" not in r.stderr and "position" not in text


def test_a_config_file_holding_a_lone_surrogate_is_one_line_naming_file_and_key(tmp_path, index_dir):
    (tmp_path / "run.yaml").write_text('method: direct\noptions:\n  exemplars: "x\\udcff"\n')
    r = dynrag("ask", "Who?", "--corpus", str(index_dir), "--config", str(tmp_path / "run.yaml"))
    assert_one_line_error(r, f"{tmp_path / 'run.yaml'}: options.exemplars cannot be encoded as UTF-8")


def test_a_corpus_line_holding_a_lone_surrogate_names_file_and_line(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "1", "text": "fine"}\n{"id": "2", "text": "Who founded \\udcff?"}\n')
    r = dynrag("index", str(corpus), "--out", str(tmp_path / "idx"))
    assert_one_line_error(r, f"{corpus}:2: text cannot be encoded as UTF-8")
    assert not (tmp_path / "idx").exists()


def test_a_renamed_flag_still_reads_under_its_old_spelling_with_one_warning(index_dir, tmp_path):
    """ask --index is now --corpus (eval's name for the same thing); the old spelling is kept for a
    release, hidden from --help, with one warning line; both spellings at once is an error."""
    old = dynrag("ask", "Who?", "--index", str(tmp_path / "nope"))
    assert "warning: --index is now --corpus" in old.stderr
    assert_one_line_error(old, str(tmp_path / "nope"))  # read as the corpus: the same error --corpus gives
    both = dynrag("ask", "Who?", "--index", str(index_dir), "--corpus", str(index_dir))
    assert_one_line_error(both, "--index is the old spelling of --corpus; give --corpus alone")
    shown = dynrag("ask", "--help").stdout
    assert "--corpus" in shown and "--index" not in shown
    demo = dynrag("demo", "--limit", "-1")
    assert_one_line_error(demo, "--limit must be at least 1 (got -1)")
    retrieval = dynrag("eval-retrieval", "--dataset", "hotpotqa", "--data", str(tmp_path / "none.json"),
                       "--out", str(tmp_path / "r"), "--k", "0")
    assert "warning: --k is now --cutoffs" in retrieval.stderr and retrieval.returncode != 0
