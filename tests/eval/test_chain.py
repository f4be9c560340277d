"""The chain figures by hand: sentences before the answer, hops, retrievals after the first sentence."""

import pytest

from dynrag.corpus import Passage
from dynrag.datasets.loaders import QAExample
from dynrag.eval.chain import (chain_summary, first_sentence_tokens, hop_count, reasoning_sentences,
                               retrievals_after_first_sentence)
from dynrag.eval.summary import make_record, summarize, summary_markdown


@pytest.mark.parametrize("text, expected", [
    ("Acme was founded by Bob Hale. Bob Hale was born in Cork. So the answer is Cork.", 2),
    ("So the answer is Cork.", 0),
    ("Cork.", 0),  # the short style: only the answer, no phrase
    ("Acme was founded by Bob Hale. Bob Hale was born in Cork.", 1),  # no phrase: the last holds the answer
    ("Mr. Smith was born in Dr. Hale's town of Lyon. Lyon is in France. Thus the answer is France.", 2),
    ("", 0),
])
def test_reasoning_sentences(text, expected):
    assert reasoning_sentences(text) == expected


def test_hops_come_from_the_world_then_the_decomposition_then_the_support():
    assert hop_count(["h1", "h2", "h3"], ["q1", "q2"], ["p1"]) == 3
    assert hop_count([], ["q1", "q2"], ["p1", "p2", "p3"]) == 2
    assert hop_count([], [], ["p1", "p2", "p1"]) == 2
    assert hop_count([], [], []) is None


STEPS = [  # FLARE-like: one sentence a step (kept tokens counted per step)
    {"kept_text": "Acme was founded", "kept_tokens": 3},
    {"kept_text": " by Bob Hale.", "kept_tokens": 3},  # the first sentence is complete at 6 tokens
    {"kept_text": " Bob Hale was born in Cork.", "kept_tokens": 6},
    {"kept_text": " So the answer is Cork.", "kept_tokens": 6},
]


def test_retrievals_after_the_first_sentence():
    assert first_sentence_tokens(STEPS) == 6
    assert retrievals_after_first_sentence(STEPS, [0, 3, 6, 12]) == 2  # 0 and 3 came before it ended
    assert retrievals_after_first_sentence(STEPS[:1], [0, 3]) == 0  # the sentence never ended
    assert first_sentence_tokens([{"kept_text": "Paris.", "kept_tokens": 2}]) == 2
    assert first_sentence_tokens([{"kept_text": "3.5 million", "kept_tokens": 3}]) is None  # a decimal point


def test_records_carry_the_figures_and_the_summary_averages_them():
    multi = QAExample("m", "Where was the founder of A born?", ["C"], [Passage("p", "", "x")], ["p1", "p2"])
    single = QAExample("s", "Who founded A?", ["B"], [Passage("p", "", "x")], ["p1"])
    chain = {"answer": "Acme was founded by Bob Hale. Bob Hale was born in Cork. So the answer is Cork.", "final_answer": "C",
             "retrievals": [{"position": 0}, {"position": 6}], "generated_tokens": 18, "steps": STEPS}
    one_step = {"answer": "So the answer is C.", "final_answer": "C", "retrievals": [{"position": 0}],
                "generated_tokens": 6, "steps": [{"kept_text": "So the answer is C.", "kept_tokens": 6}]}
    records = [make_record(multi, chain, 1.0, False), make_record(multi, one_step, 1.0, False),
               make_record(single, one_step, 1.0, False)]
    assert [(r["reasoning_sentences"], r["hop_count"], r["retrievals_after_first_sentence"]) for r in records] == [
        (2, 2, 1), (0, 2, 0), (0, 1, 0)]
    summary = summarize(records, dataset_has_support=False, yes_no=False)
    assert summary["reasoning_sentences_per_answer"] == pytest.approx(2 / 3)
    assert summary["multi_hop_answers"] == 2 and summary["sentence_per_hop_share"] == 0.5
    assert summary["retrievals_after_first_sentence_per_question"] == pytest.approx(1 / 3)
    markdown = summary_markdown(summary)
    assert "| multi-hop answers with a sentence per hop (%) | 50.0 (of 2) |" in markdown
    assert chain_summary([{"em": 1}])["reasoning_sentences_per_answer"] is None  # records from before
