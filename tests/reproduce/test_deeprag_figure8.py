"""DeepRAG's Figure 8: word classes per sub-question, the per-question pairing of the test, and both
commands' rows (Table 1's decomposing rows; a world's deeprag rows)."""

from __future__ import annotations

import json

import pytest

from dynrag.reproduce.catalog import open_table
from dynrag.reproduce.deeprag_figure8 import figure_after, figure8_lines, per_question_means, subquestions
from dynrag.text.pos import count_word_classes

from tests.text.test_pos import needs_tagger

# A hand-tagged lexicon: enough for the texts below, so the counts can be worked out by hand.
LEXICON = {"who": "WP", "where": "WRB", "and": "CC", "or": "CC", "he": "PRP", "his": "PRP$", "born": "VBN",
           "was": "VBD", "is": "VBZ", "bob": "NNP", "ann": "NNP", "city": "NN", "mother": "NN", "?": "."}


class HandTagger:
    """Tags by the lexicon above (unknown words: NN) and records what it was asked."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def tag_texts(self, texts):
        self.calls.append(list(texts))
        return [[(w, LEXICON.get(w.lower(), "NN")) for w in t.replace("?", " ?").split()] for t in texts]


def record(qid, question, *subs):
    return {"id": qid, "question": question, "decisions": [{"subquery": s, "retrieve": True} for s in subs]}


def test_subquestions_skip_empty_ones():
    assert subquestions({"decisions": [{"subquery": "Who?"}, {"subquery": "  "}, {"retrieve": False}]}) == ["Who?"]
    assert subquestions({}) == []


def test_per_question_means_average_within_a_question():
    counts = {"a": {"conjunctions": 2, "pronouns": 0, "wh_words": 1, "nouns": 0, "verbs": 0},
              "b": {"conjunctions": 0, "pronouns": 1, "wh_words": 1, "nouns": 2, "verbs": 0}}
    means = per_question_means([record(1, "q", "a", "b"), record(2, "q")], counts)
    assert means == {"1": {"conjunctions": 1.0, "pronouns": 0.5, "wh_words": 1.0, "nouns": 1.0, "verbs": 0.0}}


def test_figure_counts_by_hand_and_tests_the_last_row_against_the_others():
    questions = [f"Where was Bob born and who is his mother {i}?" for i in range(12)]
    plain = [record(i, q, "Where was Bob born?", "Who is Bob mother?") for i, q in enumerate(questions)]
    joined = [record(i, q, "Where was Bob born and who is his mother?") for i, q in enumerate(questions)]
    tagger = HandTagger()
    lines = figure8_lines([("iterdrag", "joined", joined), ("deeprag", "plain", plain)], tagger)
    assert len(tagger.calls) == 1  # every text tagged in one batch
    # "Where was Bob born?": WH 1, nouns 1 (Bob), verbs 2, CC 0; "Who is Bob mother?": WH 1, nouns 2, verbs 1
    assert "| plain | 24 | 1.00 | 1.50 | 1.50 | 0.00 | 0.00 |" in lines
    assert "| joined | 12 | 2.00 | 2.00 | 3.00 | 1.00 | 1.00 |" in lines
    # the question adds a number, tagged NN: nouns 3
    assert "| the question itself | 12 | 2.00 | 3.00 | 3.00 | 1.00 | 1.00 |" in lines
    tested = [t for t in lines if t.startswith("- Fewer")]
    assert len(tested) == 4
    assert tested[0].startswith("- Fewer conjunctions (CC) per sub-question than joined: 0.00 against 1.00, n 12 questions")
    assert all(t.endswith("**holds**.") for t in tested)  # 12 questions all one way: p = 2/4096


def test_figure_says_does_not_hold_when_the_trained_row_writes_more_conjunctions():
    qs = [record(i, "Who is Bob?", "Who is Bob?") for i in range(10)]
    more = [record(i, "Who is Bob?", "Who is Bob and Ann?") for i in range(10)]
    lines = figure8_lines([("deeprag_untrained", "untrained", qs), ("deeprag", "trained", more)], HandTagger())
    first = next(t for t in lines if t.startswith("- Fewer conjunctions"))
    assert "1.00 against 0.00" in first and first.endswith("**does not hold**.")


def test_no_rows_no_lines():
    assert figure8_lines([("deeprag", "x", [])], HandTagger()) == []


def _run_dir(tmp_path, name, records):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return {"run_dir": str(folder)}


def test_deeprag_figure8_reads_table1s_decomposing_rows_in_training_order(tmp_path):
    table = open_table("deeprag-figure8", {"imitation": "hf:imi", "calibration": "hf:cal"})
    assert {r.key for r in table.runs} == {"cot", "iterdrag", "deeprag_untrained", "deeprag_imi", "deeprag"}
    results = {("hotpotqa", "deeprag"): _run_dir(tmp_path, "cal", [record(1, "Who is Bob?", "Who is Bob?")] * 3),
               ("hotpotqa", "iterdrag"): _run_dir(tmp_path, "it", [record(1, "Who is Bob?", "Who and or?")] * 3)}
    lines = figure_after(table.runs, results, HandTagger(), ["hotpotqa", "popqa"])
    assert lines[1].startswith("#### hotpotqa")
    assert not any("popqa" in t for t in lines)
    assert any("tested for DeepRAG (per question" in t for t in lines)  # the trained row is the one tested


def test_world_figure8_reads_the_world_tables_deeprag_rows():
    from dynrag.reproduce.world import world_runs, WorldTableOptions

    table = open_table("world-figure8", {"calibration": "hf:cal"})
    assert [r.key for r in table.runs] == ["deeprag_untrained", "deeprag"]
    same = {(r.key, r.model, json.dumps(r.options, sort_keys=True)) for r in world_runs(WorldTableOptions(calibration="hf:cal"))}
    assert all((r.key, r.model, json.dumps(r.options, sort_keys=True)) in same for r in table.runs)


@needs_tagger
def test_figure_with_the_real_tagger():
    from dynrag.text.pos import LinguaTagger

    rows = [("iterdrag", "joined", [record(i, "Who founded the band and where was it formed?",
                                             "Who founded the band and where was it formed?") for i in range(8)]),
            ("deeprag", "split", [record(i, "Who founded the band and where was it formed?",
                                         "Who founded the band?", "Where was the band formed?") for i in range(8)])]
    lines = figure8_lines(rows, LinguaTagger())
    assert "| split | 16 | 1.00 | 1.00 | 1.50 | 0.00 | 0.00 |" in lines
    assert "| joined | 8 | 2.00 | 1.00 | 3.00 | 1.00 | 1.00 |" in lines
    assert count_word_classes(LinguaTagger().tag_texts(["it"])[0]).pronouns == 1


def test_a_missing_tagger_is_a_one_line_error(monkeypatch):
    from dynrag.errors import ConfigError
    from dynrag.text.pos import LinguaTagger

    rows = [("deeprag", "x", [record(1, "Who?", "Who?")])]
    with pytest.raises(ConfigError, match="make tagger"):
        figure8_lines(rows, LinguaTagger(perl="no-such-perl"))
