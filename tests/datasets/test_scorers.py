"""The two scorers: SQuAD-style (default) and DRAGIN's evaluation, against hand-computed values."""

import pytest

from dynrag.datasets.formats import dataset_spec
from dynrag.errors import ConfigError
from dynrag.datasets.metrics import (
    SCORERS,
    best_token_scores,
    dragin_extract,
    open_scorer,
    separate_max_token_scores,
)


def test_dragin_strategyqa_mapping_anything_not_yes_is_no():
    assert dragin_extract("Bats fly. So the answer is yes.", True, False) == "yes"
    assert dragin_extract("So the answer is Yes, they do.", True, False) == "yes"
    assert dragin_extract("So the answer is no.", True, False) == "no"
    assert dragin_extract("So the answer is unclear.", True, False) == "no"
    assert dragin_extract("So the answer is probably yes.", True, False) == "no"
    assert dragin_extract("Yes, bats fly.", True, False) == ""  # no phrase: nothing to score


def test_dragin_takes_the_first_answer_phrase():
    text = "So the answer is Paris. Later the answer is Lyon."
    assert dragin_extract(text, False, False) == "Paris. Later the answer is Lyon"
    assert dragin_extract("So the answer is Neil Peart.</s>", False, False) == "Neil Peart"
    assert dragin_extract("He was born in Lyon.", False, False) == ""
    assert dragin_extract("He was born in Lyon.", False, True) == "He was born in Lyon."  # 2Wiki falls back


def test_squad_scorer_uses_the_last_phrase_and_first_yes_no_word():
    squad = open_scorer("squad", dataset_spec("strategyqa"))
    dragin = open_scorer("dragin", dataset_spec("strategyqa"))
    text = "So the answer is probably yes."
    assert squad("probably yes", text, ["yes"]).em == 1.0  # first yes-like word
    assert dragin("probably yes", text, ["yes"]).em == 0.0  # does not start with "yes": "no"


def test_precision_and_recall_maximised_separately_over_golds():
    # pred [marie, curie]; gold A [curie] -> p 1/2, r 1, f1 2/3; gold B [marie, sklodowska, curie]
    # -> p 2/2, r 2/3, f1 4/5. Separately: f1 4/5, precision 1 (B), recall 1 (A).
    golds = ["Curie", "Marie Sklodowska Curie"]
    s = separate_max_token_scores("Marie Curie", golds)
    assert (s.f1, s.precision, s.recall) == pytest.approx((0.8, 1.0, 1.0))
    b = best_token_scores("Marie Curie", golds)  # the default keeps the best-F1 gold's pair
    assert (b.f1, b.precision, b.recall) == pytest.approx((0.8, 1.0, 2 / 3))
    scored = open_scorer("dragin", dataset_spec("hotpotqa"))("", "So the answer is Marie Curie.", golds)
    assert scored.scored == "Marie Curie" and scored.recall == 1.0 and scored.em == 0.0


def test_scorer_registry_names_the_choices():
    assert SCORERS.names() == ["squad", "dragin"]
    with pytest.raises(ConfigError, match="squad, dragin"):
        open_scorer("exact", dataset_spec("hotpotqa"))


def test_a_run_records_its_scorer_and_scores_with_it(tmp_path):
    import json

    from dynrag.eval.runner import run_eval
    from tests.eval.fixtures import eval_plan
    from tests.eval import fixtures as fx
    from tests.fakes import method_factory as factory

    rows = fx.qa_rows(2)
    # FakeMethod writes "Some reasoning. So the answer is X.": both scorers extract X.
    answers = {r["question"]: r["answers"][0] for r in rows}
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    keys = dict(dataset="jsonl", data=data, method="single", out=tmp_path / "run", corpus="contexts")
    req = eval_plan(**keys, scorer="dragin")
    summary = run_eval(req, method_factory=factory(answers), progress=False)
    assert json.loads((tmp_path / "run" / "config.json").read_text())["scorer"] == "dragin"
    assert summary["scorer"] == "dragin" and summary["em"] == 1.0
    with pytest.raises(ConfigError, match='scorer: "dragin" -> "squad"'):  # another scorer in the same run dir
        run_eval(eval_plan(**keys, scorer="squad"), method_factory=factory(answers), progress=False)
