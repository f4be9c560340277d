"""Every loader on fixture files in the original format; malformed records name file and line."""

import json

import pytest

from dynrag.errors import ConfigError, DataError
from dynrag.datasets.loaders import LoadReport, load_aliases, load_examples, passage_key
from dynrag.eval.pool import pool_contexts
from tests.eval import fixtures as fx


def load(dataset, path, **kw):
    return list(load_examples(dataset, path, **kw))


def test_hotpotqa_contexts_and_supporting(tmp_path):
    ex = load("hotpotqa", fx.write_json(tmp_path / "h.json", fx.HOTPOT))
    assert [e.id for e in ex] == ["h1", "h2"]
    h1 = ex[0]
    assert h1.answers == ["Rhone"]
    assert [p.title for p in h1.contexts] == ["Velmora bridge", "Lyon", "Paris"]
    assert h1.contexts[0].text == "The Velmora bridge is a stone bridge in Lyon. It was built in 1887."
    assert h1.supporting == [h1.contexts[0].id, h1.contexts[1].id]
    # the empty paragraph is dropped; the Lyon paragraph has the same id in both questions
    assert [p.title for p in ex[1].contexts] == ["Lyon"]
    assert ex[1].contexts[0].id == h1.contexts[1].id == passage_key("Lyon", "Lyon is a city in France. The Rhone flows through Lyon.")
    assert len(pool_contexts(ex)) == 3


def test_2wiki_with_alias_files(tmp_path):
    data = fx.write_json(tmp_path / "w.json", fx.TWOWIKI)
    (ex,) = load("2wikimultihopqa", data)
    assert ex.answers == ["Ana Petrova"] and ex.supporting == [ex.contexts[0].id]
    by_qid = fx.write_json(tmp_path / "a.json", {"w1": ["A. Petrova", "Ana Petrova"]})
    (ex,) = load("2wikimultihopqa", data, aliases=load_aliases(by_qid))
    assert ex.answers == ["Ana Petrova", "A. Petrova"]
    official = fx.write_jsonl(tmp_path / "id_aliases.json", [{"Q_id": "Q42", "aliases": ["Petrova"], "demonyms": []},
                                                              {"Q_id": "Q7", "aliases": ["x"], "demonyms": []}])
    (ex,) = load("2wikimultihopqa", data, aliases=load_aliases(official))
    assert ex.answers == ["Ana Petrova", "Petrova"]
    one_line = fx.write_jsonl(tmp_path / "one.json", [{"Q_id": "Q42", "aliases": ["Petrova"], "demonyms": ["Petrovian"]}])
    assert load_aliases(one_line) == {"Q42": ["Petrova", "Petrovian"]}


def test_musique_aliases_and_is_supporting(tmp_path):
    (ex,) = load("musique", fx.write_jsonl(tmp_path / "m.jsonl", fx.MUSIQUE))
    assert ex.answers == ["Marie Lenoir", "M. Lenoir"]
    assert [p.title for p in ex.contexts] == ["North School", "Old Mill"]
    assert ex.supporting == [ex.contexts[0].id]


def test_musique_reads_a_json_list_as_well_as_jsonl(tmp_path):
    """Released MuSiQue subsets come as one JSON list too; both forms give the same questions."""
    from_lines = load("musique", fx.write_jsonl(tmp_path / "m.jsonl", fx.MUSIQUE))
    from_list = load("musique", fx.write_json(tmp_path / "m.json", fx.MUSIQUE))
    def seen(examples):
        return [(e.id, e.question, e.answers, [(c.title, c.text) for c in e.contexts], len(e.supporting))
                for e in examples]

    assert seen(from_list) == seen(from_lines) and len(from_list) == len(fx.MUSIQUE)


def test_strategyqa_yes_no_and_facts(tmp_path):
    ex = load("strategyqa", fx.write_json(tmp_path / "s.json", fx.STRATEGY))
    assert [e.answers for e in ex] == [["yes"], ["no"]]
    assert [p.text for p in ex[0].contexts] == fx.STRATEGY[0]["facts"]
    assert ex[0].supporting == [p.id for p in ex[0].contexts]


def test_iirc_answer_types_contexts_and_unanswerable(tmp_path):
    report = LoadReport()
    ex = load("iirc", fx.write_json(tmp_path / "i.json", fx.IIRC), report=report)
    assert [e.id for e in ex] == ["q1", "q2", "q4"]
    assert ex[0].answers == ["41", "41 years"]
    assert ex[1].answers == ["Jean Roux"]
    assert ex[2].answers == ["yes"]
    assert report.excluded == {"unanswerable (IIRC answer type 'none')": 1}
    q1 = ex[0]
    assert [p.title for p in q1.contexts] == ["Velmora bridge", "Velmora bridge", "Jean Roux"]
    assert q1.supporting == [q1.contexts[1].id, q1.contexts[2].id]


def test_popqa_tsv_and_json_forms(tmp_path):
    ex = load("popqa", fx._write_text(tmp_path / "popQA.tsv", fx.POPQA_TSV))
    assert [(e.id, e.answers) for e in ex] == [("101", ["engineer", "civil engineer"]), ("102", ["France", "French Republic"])]
    assert ex[0].question == "What is Jean Roux's occupation?" and ex[0].contexts == [] and ex[0].supporting == []
    jl = load("popqa", fx.write_jsonl(tmp_path / "p.jsonl", fx.POPQA_JSONL))
    assert [(e.id, e.answers) for e in jl] == [("0", ["engineer"]), ("x2", ["France"])]
    assert jl[0].contexts[0].title == "Jean Roux"
    js = load("popqa", fx.write_json(tmp_path / "p.json", fx.POPQA_JSONL))
    assert [e.answers for e in js] == [e.answers for e in jl]


def test_generic_jsonl(tmp_path):
    ex = load("jsonl", fx.write_jsonl(tmp_path / "q.jsonl", fx.GENERIC))
    assert [(e.id, e.answers) for e in ex] == [("g1", ["Lyon", "through Lyon"]), ("2", ["1887"])]
    assert [p.text for p in ex[1].contexts] == ["Built in 1887.", "A loose string context."]
    assert ex[1].supporting == [ex[1].contexts[0].id]


def test_limit_stops_early(tmp_path):
    path = fx.write_jsonl(tmp_path / "q.jsonl", fx.qa_rows(5))
    assert [e.id for e in load("jsonl", path, limit=2)] == ["q0", "q1"]


# ---- malformed input -------------------------------------------------------------------------


def test_json_list_bad_record_names_file_line_and_index(tmp_path):
    rows = json.loads(json.dumps(fx.HOTPOT))
    del rows[1]["answer"]
    path = fx.write_json(tmp_path / "h.json", rows)
    line = next(i for i, l in enumerate(path.read_text().splitlines(), 1) if '"h2"' in l) - 1  # the record's "{"
    with pytest.raises(DataError) as e:
        load("hotpotqa", path)
    assert str(e.value) == f"{path}:{line}: record 1: missing field 'answer'"


def test_json_syntax_error_names_line(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('[\n{"qid": "a", "question": "q?", "answer": true},\n{"qid": "b", "question": }\n]\n')
    with pytest.raises(DataError, match=r"s\.json:3: not valid JSON: expecting value at column 26 \("):
        load("strategyqa", path)
    path.write_text('{"not": "a list"}')
    with pytest.raises(DataError, match="expected a JSON list"):
        load("strategyqa", path)


def test_jsonl_bad_line_and_skip_bad(tmp_path):
    path = tmp_path / "q.jsonl"
    rows = [json.dumps(r) for r in fx.qa_rows(3)]
    path.write_text(rows[0] + "\n\n{broken\n" + rows[1] + "\n" + json.dumps({"id": "q9", "question": "?"}) + "\n" + rows[2] + "\n")
    with pytest.raises(DataError, match=r"q\.jsonl:3: not valid JSON: expecting property name enclosed in double quotes at column 2 \("):
        load("jsonl", path)
    report = LoadReport()
    ex = load("jsonl", path, skip_bad=True, report=report)
    assert [e.id for e in ex] == ["q0", "q1", "q2"]
    assert report.skipped == 2
    assert report.messages[1] == f"{path}:5: record 3: missing field 'answers'"


def test_a_record_holding_a_lone_surrogate_names_file_line_and_field(tmp_path):
    # json.dumps writes the lone surrogate as the escape "\udcff", as a careless tool would.
    rows = fx.qa_rows(3)
    rows[1]["question"] = "Who founded \udcff?"
    path = fx.write_jsonl(tmp_path / "q.jsonl", rows)
    assert "\\udcff" in path.read_text()
    with pytest.raises(DataError, match=r"q\.jsonl:2: record 1: question cannot be encoded as UTF-8: character 13 "):
        load("jsonl", path)
    report = LoadReport()
    assert [e.id for e in load("jsonl", path, skip_bad=True, report=report)] == ["q0", "q2"]
    hotpot = json.loads(json.dumps(fx.HOTPOT))
    hotpot[1]["context"][0][1][0] = "Ends here\ud800"
    path = fx.write_json(tmp_path / "h.json", hotpot)
    with pytest.raises(DataError, match=r"h\.json:\d+: record 1: context\[0\]\[1\]\[0\] cannot be encoded"):
        load("hotpotqa", path)


def test_duplicate_id_is_a_bad_record(tmp_path):
    path = fx.write_jsonl(tmp_path / "q.jsonl", fx.qa_rows(2) + fx.qa_rows(1))
    with pytest.raises(DataError, match=r"q\.jsonl:3: record 2: duplicate id 'q0' \(first seen on line 1\)"):
        load("jsonl", path)


def test_strategyqa_non_bool_answer_and_tsv_column_count(tmp_path):
    path = fx.write_json(tmp_path / "s.json", [{"qid": "a", "question": "q?", "answer": "yes"}])
    with pytest.raises(DataError, match="record 0: field 'answer' must be true or false"):
        load("strategyqa", path)
    tsv = fx._write_text(tmp_path / "p.tsv", "id\tquestion\tpossible_answers\n1\tq?\n")
    with pytest.raises(DataError, match=r"p\.tsv:2: record 0: has 2 columns, the header has 3"):
        load("popqa", tsv)


def test_missing_file_and_unknown_dataset(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        load("musique", tmp_path / "nope.jsonl")
    with pytest.raises(ConfigError, match="unknown dataset 'squad'"):
        load("squad", tmp_path / "nope.jsonl")


def test_the_dataset_registry_names_every_format_once():
    from dynrag.datasets.formats import DATASETS, dataset_spec as dataset

    assert DATASETS.names() == ["hotpotqa", "2wikimultihopqa", "musique", "strategyqa", "iirc", "popqa", "jsonl", "world"]
    assert dataset("strategyqa").yes_no and not dataset("hotpotqa").yes_no
    assert dataset("popqa").exemplar_style == "default" and dataset("musique").exemplar_style == "musique"
    with pytest.raises(ConfigError, match="unknown dataset 'squad'; choose one of: hotpotqa, 2wikimultihopqa"):
        dataset("squad")
