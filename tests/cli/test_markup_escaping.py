"""User text is printed as written, never parsed as rich markup or emoji codes.

Before: a path holding ``[/red]`` crashed the error printer with MarkupError, ``corpus[v2].jsonl``
was reported as ``corpus.jsonl`` and ``:100:`` printed as an emoji.
"""

import io

import pytest

from tests.cli_inprocess import run_in_process as dynrag  # what a user sees, without an interpreter start
from rich.console import Console

from dynrag.methods.base import Answer, Retrieval, Step, Trace
from dynrag.render import render_answer
from dynrag.retrieval.base import Hit

HOSTILE = ["p[/red]", "corpus[v2]", "a:100:b", "[bold]x", "[link=file:///etc]y"]


@pytest.mark.parametrize("name", HOSTILE)
def test_a_missing_corpus_path_is_named_exactly(tmp_path, name):
    source = tmp_path / name / f"{name}.jsonl"
    r = dynrag("index", str(source), "--out", str(tmp_path / "idx"))
    assert r.returncode == 1 and "Traceback" not in r.stderr and "MarkupError" not in r.stderr
    assert str(source) in r.stderr.replace("\n", ""), r.stderr


def test_a_bad_line_in_a_bracketed_file_names_it_exactly(tmp_path):
    source = tmp_path / "corpus[v2].jsonl"
    source.write_text('{"id": "1", "text": "fine"}\nnot json\n')
    r = dynrag("index", str(source), "--out", str(tmp_path / "idx"))
    assert r.returncode == 1 and f"{source}:2" in r.stderr.replace("\n", "")


def test_index_success_line_keeps_brackets(tmp_path):
    source = tmp_path / "c.jsonl"
    source.write_text('{"id": "1", "text": "the alpha bridge"}\n')
    out = tmp_path / "idx[old]:100:"
    r = dynrag("index", str(source), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert str(out) in r.stdout.replace("\n", "")


def test_rendered_answers_show_titles_texts_and_queries_literally():
    trace = Trace("what is [/red] :100:?", "single", "fake", {})
    hits = [Hit("doc[1]", "[/red] Title :100:", "text with [bold]markup[/bold] and :smile:", 1.5)]
    trace.retrievals.append(Retrieval("query [/red] :100:", hits))
    trace.steps.append(Step("generate", "So the answer is [x].", "So the answer is [x].", 5))
    out = io.StringIO()
    render_answer(Console(file=out, width=200, color_system=None), Answer("So the answer is [x].", "[x] :100:", trace))
    shown = out.getvalue()
    for literal in ("what is [/red] :100:?", "[x] :100:", "query [/red] :100:", "[/red] Title :100:",
                    "[bold]markup[/bold] and :smile:"):
        assert literal in shown, (literal, shown)
    assert "💯" not in shown
