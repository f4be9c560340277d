"""Gold decompositions: each dataset's own field into sub-questions with #k references."""

import pytest

from dynrag.errors import DataError
from dynrag.datasets.decomposition import evidence_decomposition, musique_decomposition, strategyqa_decomposition
from dynrag.datasets.loaders import load_examples
from dynrag.datasets.records import BadRecord
from tests.eval import fixtures as fx


def test_2wiki_evidences_become_hops_that_refer_back_instead_of_naming_answers():
    evidences = [
        ["The Seventh Victim", "director", "Mark Robson"],
        ["Baby Face Morgan", "director", "Arthur Dreifuss"],
        ["Mark Robson (film director)", "country of citizenship", "Canadian"],
        ["Arthur Dreifuss", "country of citizenship", "American"],
        ["Arthur Dreifuss", "country of citizenship", "German"],
    ]
    assert evidence_decomposition(evidences) == [
        "The Seventh Victim >> director",
        "Baby Face Morgan >> director",
        "#1 >> country of citizenship",
        "#2 >> country of citizenship",
    ]
    chain = [["Princess Alexandrine of Prussia", "mother", "Louise of Mecklenburg-Strelitz"],
             ["Louise of Mecklenburg-Strelitz", "date of death", "19 July 1810"]]
    hops = evidence_decomposition(chain)
    assert hops == ["Princess Alexandrine of Prussia >> mother", "#1 >> date of death"]
    assert not any("1810" in h or "Louise" in h for h in hops)
    with pytest.raises(BadRecord, match=r"evidences\[0\]"):
        evidence_decomposition([["only", "two"]])


def test_musique_and_strategyqa_keep_their_questions():
    steps = [{"question": "Hello Love >> performer", "answer": "Hank Snow"},
             {"question": "What city did #1 live in  when he died?", "answer": "Nashville"}]
    assert musique_decomposition(steps) == ["Hello Love >> performer", "What city did #1 live in when he died?"]
    assert strategyqa_decomposition(["When was it built?", "Is #1 before 1900?"]) == ["When was it built?", "Is #1 before 1900?"]
    assert musique_decomposition(None) == [] and strategyqa_decomposition(None) == []
    with pytest.raises(BadRecord, match=r"question_decomposition\[0\]"):
        musique_decomposition([{"answer": "x"}])


def test_the_loaders_fill_the_decomposition(tmp_path):
    (wiki,) = load_examples("2wikimultihopqa", fx.write_json(tmp_path / "w.json", fx.TWOWIKI))
    assert wiki.decomposition == ["Harbour Mill >> director"]
    strategy = list(load_examples("strategyqa", fx.write_json(tmp_path / "s.json", fx.STRATEGY)))
    assert strategy[0].decomposition == ["When was it built?", "Is #1 before 1900?"]
    assert strategy[1].decomposition == []
    record = dict(fx.MUSIQUE[0], question_decomposition=[{"question": "Which school is on the north bank?"},
                                                         {"question": "Who founded #1?"}])
    (musique,) = load_examples("musique", fx.write_jsonl(tmp_path / "m.jsonl", [record]))
    assert musique.decomposition == ["Which school is on the north bank?", "Who founded #1?"]
    hotpot = list(load_examples("hotpotqa", fx.write_json(tmp_path / "h.json", fx.HOTPOT)))
    assert all(ex.decomposition == [] for ex in hotpot)


def test_a_bad_decomposition_names_file_and_line(tmp_path):
    bad = dict(fx.MUSIQUE[0], question_decomposition="not a list")
    path = fx.write_jsonl(tmp_path / "m.jsonl", [fx.MUSIQUE[0] | {"id": "ok"}, bad])
    with pytest.raises(DataError, match=r"m\.jsonl:2: .*question_decomposition"):
        list(load_examples("musique", path))


def test_a_json_list_dataset_may_also_be_one_record_a_line(tmp_path):
    (ex,) = load_examples("2wikimultihopqa", fx.write_jsonl(tmp_path / "w.jsonl", fx.TWOWIKI))
    assert ex.id == "w1" and ex.decomposition == ["Harbour Mill >> director"]
