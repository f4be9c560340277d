"""Query transforms: parsing the model's text, fusing rankings, the prompts' layout, and the texts
cache resuming (retrieval/query_transforms.py, transform_registry.py, query_prompts.py, hyde_cache.py)."""

import json
from contextlib import contextmanager

import pytest

from dynrag.errors import ConfigError, DataError
from dynrag.lm.chat import ChatFrame
from dynrag.retrieval.hyde import HYDE, HYDE_PROMPT
from dynrag.retrieval.hyde_cache import FORMAT, PROMPT_SHA256, HydePassages, QueryTexts, sampling_of
from dynrag.retrieval.query_transforms import QueryTransformer, check_transform, fuse_rankings
from dynrag.retrieval.transform_registry import DECOMPOSE, REWRITE, parse_rewrite, parse_subquestions
from tests.fakes import ScriptedLM

Q = "Which river flows through the town where the Velmora bridge stands?"


def reply(prompt: str) -> str:
    """A model that answers each kind of prompt in its shape."""
    if prompt.endswith("Sub-questions:"):
        return "\n1. Where does the Velmora bridge stand?\n2. Which river flows through Lyon?\n\nQuestion: more"
    if prompt.endswith("Query:"):
        return " Velmora bridge town river\nQuestion: more"
    return " The Velmora bridge stands in Lyon on the Rhone.\nQuestion: more"


class SamplingLM(ScriptedLM):
    """ScriptedLM with ``sampled``: inside it, the text depends on the draw's seed."""

    def __init__(self, name="sampling"):
        super().__init__(self._reply, name=name)
        self.seeds = []
        self._sampling = None

    @contextmanager
    def sampled(self, sampling):
        self._sampling = sampling
        self.seeds.append(sampling.seed)
        try:
            yield
        finally:
            self._sampling = None

    def _reply(self, prompt):
        if self._sampling is None:
            return reply(prompt)
        return f" drawn passage {self._sampling.seed % 1000} t={self._sampling.temperature}"


# ---- parsing the model's text -----------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("\n1. Where is A?\n2. Where is B?", ["Where is A?", "Where is B?"]),
    ("1) Where is A?\n\n\n2) Where is B?\n", ["Where is A?", "Where is B?"]),  # blank lines between
    ("- Where is A?\n* Where is B?\n• Where is C?", ["Where is A?", "Where is B?", "Where is C?"]),
    ("1. A?\n2. B?\n3. C?\n4. D?\n5. E?", ["A?", "B?", "C?"]),  # more than three: the first three
    ("Sub-question 1: A?\nSub-question 2: B?", ["A?", "B?"]),
    ("Sub-questions:\n1. A?\n2. a?\n3. B?", ["A?", "B?"]),  # the label echoed; a repeat dropped
    ("1. A?\nQuestion: Who made C?\n1. C?", ["A?"]),  # the model inventing the next example: stop
    ("Where is A?", ["Where is A?"]),  # no numbering
    ("", ["Who  built it?".replace("  ", " ")]),  # none: the question itself
    ("\n\n1.\n- \n", ["Who built it?"]),
])
def test_sub_questions_are_parsed_from_numbered_or_bulleted_lines(text, expected):
    assert parse_subquestions(text, "Who  built it?") == expected


def test_a_rewrite_is_its_first_line_without_label_or_quotes_else_the_question():
    assert parse_rewrite("\n Query: \"Velmora bridge river\"\nmore", Q) == "Velmora bridge river"
    assert parse_rewrite("   \n", "who  built it?") == "who built it?"


# ---- fusion -------------------------------------------------------------------------------------------


def test_rrf_of_disjoint_rankings_interleaves_them_round_robin():
    assert fuse_rankings([["a", "b", "c"], ["d", "e"]]) == ["a", "d", "b", "e", "c"]
    assert fuse_rankings([["a", "b", "c"], ["d", "e"], ["f"]], depth=4) == ["a", "d", "f", "b"]


def test_rrf_by_hand():
    # k=60: c = 1/63 + 1/61 (.03226) > a = 1/61 (.01639) > b = d = 1/62 (tie: same best rank, b's list first)
    assert fuse_rankings([["a", "b", "c"], ["c", "d"]]) == ["c", "a", "b", "d"]
    assert fuse_rankings([["a", "b", "c"], ["c", "d"]], depth=2) == ["c", "a"]
    # k=0: x = 1, y = 1/2 + 1 = 1.5, z = 1/2
    assert fuse_rankings([["x", "y"], ["y", "z"]], k=0) == ["y", "x", "z"]
    # an id repeated within a ranking counts once, at its best rank: a = 1/61, b = 1/63
    assert fuse_rankings([["a", "a", "b"], []]) == ["a", "b"]
    assert fuse_rankings([["p", "q"]]) == ["p", "q"] and fuse_rankings([]) == []
    with pytest.raises(ValueError):
        fuse_rankings([["a"]], k=-1)


# ---- prompts ------------------------------------------------------------------------------------------


def test_prompts_are_plain_text_or_inside_the_chat_frame():
    assert HYDE.template() == HYDE_PROMPT and HYDE.sha256() == PROMPT_SHA256
    frame = ChatFrame("<sys>", "</sys><user>", "</user><assistant>")
    chat = DECOMPOSE.text("who  built it?", frame)
    assert chat.startswith("<sys>" + DECOMPOSE.instruction + "</sys><user>Example:\n\nQuestion: Were Ada")
    assert chat.endswith("Question: who built it?</user><assistant>Sub-questions:")
    plain = REWRITE.text("who built it?")
    assert plain.startswith(REWRITE.instruction + "\n\n") and plain.endswith("Question: who built it?\nQuery:")
    assert REWRITE.sha256() != REWRITE.sha256(frame)


# ---- the texts cache ----------------------------------------------------------------------------------


def test_texts_are_written_once_and_a_rerun_reads_them_back(tmp_path):
    path = tmp_path / "texts.jsonl"
    lm = ScriptedLM(reply)
    rewrite = QueryTransformer("rewrite", QueryTexts(lm, path))
    decompose = QueryTransformer("decompose", QueryTexts(lm, path))
    assert rewrite.write(Q) == 1 and decompose.write(Q) == 1 and len(lm.prompts) == 2
    assert rewrite.queries([Q]) == ["Velmora bridge town river"]
    assert decompose.queries([Q]) == [["Where does the Velmora bridge stand?", "Which river flows through Lyon?"]]
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["format"], r["kind"], r["sampling"]) for r in records] == [(FORMAT, "rewrite", None), (FORMAT, "decompose", None)]
    assert records[1]["text"].startswith("1. Where does") and records[1]["seconds"] >= 0

    again = ScriptedLM(reply)
    for name in ("rewrite", "decompose"):
        transformer = QueryTransformer(name, QueryTexts(again, path))
        assert transformer.write(Q) == 0 and transformer.texts.reused == 1
    assert again.prompts == []  # nothing written again
    # another model, or the chat layout, writes its own
    other = QueryTexts(ScriptedLM(reply, name="other"), path)
    assert QueryTransformer("rewrite", other).write(Q) == 1
    chat = QueryTexts(again, path, ChatFrame("<s>", "<u>", "<a>"))
    assert QueryTransformer("rewrite", chat).write(Q) == 1 and again.prompts[-1].endswith("<a>Query:")


def test_a_killed_write_is_ignored_and_cut_off_before_the_next_record(tmp_path):
    path = tmp_path / "texts.jsonl"
    QueryTransformer("rewrite", QueryTexts(ScriptedLM(reply), path)).write(Q)
    path.write_text(path.read_text() + '{"format": "dynrag-hyde/2", "kind": "decom')  # kill -9 mid-write
    lm = ScriptedLM(reply)
    texts = QueryTexts(lm, path)
    assert QueryTransformer("rewrite", texts).write(Q) == 0
    assert QueryTransformer("decompose", texts).write(Q) == 1
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line)["format"] == FORMAT for line in lines)
    assert len(QueryTexts(lm, path).records) == 2
    path.write_text(lines[0] + "\n{}\n" + lines[1] + "\n")
    with pytest.raises(DataError, match=r"texts.jsonl:2: "):
        QueryTexts(lm, path)


def test_a_first_format_hyde_file_is_still_read(tmp_path):
    path = tmp_path / "hyde.jsonl"
    old = {"format": "dynrag-hyde/1", "model": "scripted", "max_new_tokens": 64, "prompt_sha256": PROMPT_SHA256,
           "question": Q, "passage": "An old passage.", "decoded_tokens": 3, "seconds": 0.5}
    path.write_text(json.dumps(old) + "\n")
    lm = ScriptedLM(reply)
    hyde = QueryTransformer("hyde", QueryTexts(lm, path))
    assert hyde.write(Q) == 0 and hyde.queries([Q]) == [f"{Q} An old passage."]
    assert hyde.generation_seconds([Q]) == 0.5 and lm.prompts == []
    assert HydePassages(lm, path).expand([Q]) == [f"{Q} An old passage."]


def test_hyde_multi_shares_the_greedy_passage_and_draws_the_others_reproducibly(tmp_path):
    path = tmp_path / "hyde.jsonl"
    lm = SamplingLM()
    multi = QueryTransformer("hyde-multi", QueryTexts(lm, path), hyde_documents=3)
    assert multi.write(Q) == 3 and len(lm.seeds) == 2
    query = multi.queries([Q])[0]
    greedy = "The Velmora bridge stands in Lyon on the Rhone."
    assert query.startswith(f"{Q} {greedy} drawn passage") and query.count("drawn passage") == 2
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["sampling"] and r["sampling"]["draw"] for r in records] == [None, 1, 2]
    assert records[1]["sampling"] == sampling_of(Q, 1) and sampling_of(Q, 1) != sampling_of(Q, 2)
    # hyde reads the greedy passage back; hyde-only searches it alone
    again = SamplingLM()
    assert QueryTransformer("hyde", QueryTexts(again, path)).write(Q) == 0
    only = QueryTransformer("hyde-only", QueryTexts(again, path))
    assert only.write(Q) == 0 and only.queries([Q]) == [greedy]
    # a fresh file draws the same texts (seeded by question and draw)
    fresh = QueryTransformer("hyde-multi", QueryTexts(SamplingLM(), tmp_path / "fresh.jsonl"), hyde_documents=3)
    assert fresh.queries([Q]) == [query]
    assert multi.settings()["hyde_documents"] == 3 and multi.count([Q, Q]) == 6


def test_bad_transforms_and_settings_are_one_line_errors():
    with pytest.raises(ConfigError, match="unknown query transform 'hyd'; choose one of: none, hyde, hyde-only, "
                                          "hyde-multi, rewrite, decompose"):
        check_transform("hyd")
    with pytest.raises(ConfigError, match="hyde_documents must be at least 1"):
        check_transform("hyde-multi", 0)
    with pytest.raises(ConfigError, match="cannot do; use a local model"):
        QueryTransformer("hyde-multi", QueryTexts(ScriptedLM(reply)), hyde_documents=2)
    assert QueryTransformer("hyde-multi", QueryTexts(ScriptedLM(reply)), hyde_documents=1).write(Q) == 1
