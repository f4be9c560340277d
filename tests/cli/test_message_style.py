"""Every error a user sees reads ``WHERE: what is wrong (what would be right)``, through the real CLI.

Before: a bad JSON line said "Invalid control character at: line 1 column 5 (char 4)" in one
command and "invalid JSON (... at column 5)" in another; a bad --limit said "--limit: limit:
Input should be greater than or equal to 1", naming its flag twice in pydantic's words.
"""

from __future__ import annotations

import json
import re

import yaml

from tests.cli.test_cli_errors import assert_one_line_error
from tests.cli_inprocess import run_in_process as dynrag

# FILE:LINE: not valid JSON: <json's message, in lower case> at column C (what would be right)
JSON_STYLE = re.compile(r"error: (?P<file>\S+):(?P<line>\d+): not valid JSON: [a-z][^:]* at column (?P<col>\d+) \([^)]+\)$")


def qa_row(qid: str) -> str:
    return json.dumps({"id": qid, "question": "Who built the bridge?", "answers": ["Ann"]})


def eval_args(data, out):
    return ("eval", "--dataset", "jsonl", "--data", data, "--method", "single", "--corpus", "contexts", "--out", out)


def test_index_and_eval_report_bad_json_in_the_same_words(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "a", "text": "fine"}\n{"id": "b", "text": "tab\there"}\n')
    r = dynrag("index", corpus, "--out", tmp_path / "idx")
    index_line = assert_one_line_error(r, f"{corpus}:2: not valid JSON: invalid control character at column 25 (")
    data = tmp_path / "qa.jsonl"
    data.write_text(qa_row("q1") + "\n" + '{"id": "q2" "question": "Who?"}\n')
    r = dynrag(*eval_args(data, tmp_path / "run"))
    eval_line = assert_one_line_error(r, f"{data}:2: not valid JSON: expecting ',' delimiter at column 13 (")
    for line, path in ((index_line, corpus), (eval_line, data)):
        match = JSON_STYLE.fullmatch(line)
        assert match and match["file"] == str(path) and match["line"] == "2", line
        assert "at at" not in line and "(char" not in line


def test_a_truncated_data_file_says_it_may_be_cut_short(tmp_path):
    data = tmp_path / "qa.jsonl"
    data.write_text(qa_row("q1") + "\n" + qa_row("q2")[:30])
    r = dynrag(*eval_args(data, tmp_path / "run"))
    line = assert_one_line_error(r, f"{data}:2: not valid JSON: ", "is the file cut short?")
    assert JSON_STYLE.fullmatch(line), line


def test_a_bad_limit_names_its_flag_once_in_plain_words(tmp_path):
    data = tmp_path / "qa.jsonl"
    data.write_text(qa_row("q1") + "\n")
    r = dynrag(*eval_args(data, tmp_path / "run"), "--limit", "0")
    assert assert_one_line_error(r) == "error: --limit: must be at least 1 (got 0)"
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"limit": 0}))
    r = dynrag(*eval_args(data, tmp_path / "run"), "--config", config)
    assert assert_one_line_error(r) == f"error: {config}: limit: must be at least 1 (got 0)"
    r = dynrag(*eval_args(data, tmp_path / "run"), "--option", "k=many")
    assert assert_one_line_error(r) == "error: --option k of method 'single': must be a whole number (got 'many')"
    assert not (tmp_path / "run").exists()
