"""HyDE passages on disk: written once by the model, reused while model and prompt match."""

import json

import pytest

from dynrag.errors import DataError
from dynrag.retrieval.hyde import hypothetical_passage, join_query
from dynrag.retrieval.hyde_cache import FORMAT, HydePassages
from tests.fakes import CallCountingLM
from tests.tiny_models import tiny_llama_lm

QUESTIONS = ["who built the bridge ?", "where is the river ?"]


@pytest.fixture(scope="module")
def tiny():
    return tiny_llama_lm(seed=1)


def test_passages_are_written_once_then_reused_from_the_file(tiny, tmp_path):
    path = tmp_path / "hyde.jsonl"
    lm = CallCountingLM(tiny)
    first = HydePassages(lm, path, max_new_tokens=6)
    expanded = first.expand(QUESTIONS)
    expected = [join_query(q, hypothetical_passage(tiny, q, 6)[0]) for q in QUESTIONS]
    assert expanded == expected and lm.calls == 2 and first.generated == 2
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["question"] for r in records] == QUESTIONS
    assert all(r["format"] == FORMAT and r["seconds"] > 0 and 1 <= r["decoded_tokens"] <= 6 for r in records)
    assert first.generation_seconds(QUESTIONS) == pytest.approx(sum(r["seconds"] for r in records))

    again = HydePassages(lm, path, max_new_tokens=6)
    assert again.expand(QUESTIONS) == expected and lm.calls == 2  # no generation
    assert (again.generated, again.reused) == (0, 2)
    # another budget (or model) does not reuse those passages
    other = HydePassages(CallCountingLM(tiny, name="another-model"), path, max_new_tokens=6)
    other.expand(QUESTIONS[:1])
    assert other.generated == 1


def test_a_cut_short_last_line_is_ignored_and_a_bad_middle_line_names_file_and_line(tiny, tmp_path):
    path = tmp_path / "hyde.jsonl"
    HydePassages(tiny, path, max_new_tokens=4).expand(QUESTIONS)
    whole = path.read_text()
    path.write_text(whole + '{"format": "dynrag-hyde/1", "quest')  # a crash mid-write
    assert HydePassages(tiny, path, max_new_tokens=4).expand(QUESTIONS)  # reads fine
    lines = whole.splitlines()
    path.write_text(lines[0] + "\nnot json\n" + lines[1] + "\n")
    with pytest.raises(DataError, match=r"hyde.jsonl:2: "):
        HydePassages(tiny, path, max_new_tokens=4)


def test_without_a_file_passages_live_in_memory(tiny):
    lm = CallCountingLM(tiny)
    hyde = HydePassages(lm, None, max_new_tokens=4)
    hyde.expand(QUESTIONS)
    hyde.expand(QUESTIONS)
    assert lm.calls == 2 and hyde.reused == 2
