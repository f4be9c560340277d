"""Knowledge-boundary figures and the summary, against hand-computed values."""

import math

import pytest

from dynrag.datasets.boundary import Confusion, boundary_scores, confusion, knowledge_boundary
from dynrag.datasets.metrics import score_answer, yes_no
from dynrag.eval.summary import summarize


def test_confusion_counts_with_the_papers_positive_class():
    # positive prediction: did not retrieve; positive truth: the model alone was right
    skipped = [True, True, False, False, True]
    known = [True, False, True, False, True]
    assert confusion(skipped, known) == Confusion(tp=2, fp=1, fn=1, tn=1)


def test_boundary_scores_hand_computed():
    # tp=3 fp=1 fn=2 tn=4 (n=10)
    s = boundary_scores(Confusion(3, 1, 2, 4))
    assert s["f1"] == pytest.approx(6 / 9)  # 2*3 / (6+1+2)
    assert s["accuracy"] == pytest.approx(0.7)
    assert s["balanced_accuracy"] == pytest.approx((3 / 5 + 4 / 5) / 2)
    assert s["mcc"] == pytest.approx((12 - 2) / math.sqrt(4 * 5 * 5 * 6))


def test_boundary_degenerate_tables():
    always_retrieves = boundary_scores(Confusion(tp=0, fp=0, fn=2, tn=3))
    assert always_retrieves["f1"] == 0.0 and always_retrieves["mcc"] == 0.0
    assert always_retrieves["accuracy"] == pytest.approx(0.6)  # the share the model alone gets wrong
    assert always_retrieves["balanced_accuracy"] == pytest.approx(0.5)
    never_retrieves = boundary_scores(Confusion(tp=2, fp=3, fn=0, tn=0))
    assert never_retrieves["f1"] == pytest.approx(4 / 7) and never_retrieves["mcc"] == 0.0
    all_known = boundary_scores(Confusion(tp=4, fp=0, fn=0, tn=0))
    assert all_known == {"f1": 1.0, "accuracy": 1.0, "balanced_accuracy": 1.0, "mcc": 0.0}
    assert boundary_scores(Confusion(0, 0, 0, 0))["accuracy"] == 0.0


def rows_from_counts(tp, fp, fn, tn):
    """A run and a no-retrieval baseline whose joined table has exactly these counts."""
    run, base = [], []
    for kind, count in (("tp", tp), ("fp", fp), ("fn", fn), ("tn", tn)):
        for i in range(count):
            qid = f"{kind}{i}"
            run.append({"id": qid, "retrievals": 0 if kind in ("tp", "fp") else 2, "em": 0.0})
            base.append({"id": qid, "em": 1.0 if kind in ("tp", "fn") else 0.0, "retrievals": 0})
    return run, base


@pytest.mark.parametrize(
    "method, counts, published",
    [
        # Table 3 of the DeepRAG paper, arXiv v2 (2WikiMultihopQA, 1,000 questions, 282 right without
        # retrieval); the counts are the only integer tables giving the published figures.
        ("FLARE (always retrieves)", (0, 0, 282, 718), (0.000, 0.718, 0.500, 0.000)),
        ("DRAGIN", (1, 10, 281, 708), (0.007, 0.709, 0.495, -0.045)),
        ("UAR", (113, 75, 169, 643), (0.481, 0.756, 0.648, 0.341)),
        ("DeepRAG-Imi", (185, 171, 97, 547), (0.580, 0.732, 0.709, 0.393)),
        ("DeepRAG", (206, 175, 76, 543), (0.621, 0.749, 0.743, 0.451)),
    ],
)
def test_knowledge_boundary_reproduces_table_3(method, counts, published):
    run, base = rows_from_counts(*counts)
    kb = knowledge_boundary(run, base)
    assert (kb["tp"], kb["fp"], kb["fn"], kb["tn"]) == counts and kb["n"] == 1000
    got = (kb["f1"], kb["accuracy"], kb["balanced_accuracy"], kb["mcc"])
    assert [round(v, 3) for v in got] == list(published), method


def test_knowledge_boundary_joins_on_id():
    run = [{"id": "a", "retrievals": 2}, {"id": "b", "retrievals": 0}, {"id": "c", "retrievals": 1}, {"id": "z", "retrievals": 1}]
    base = [{"id": "a", "em": 0.0}, {"id": "b", "em": 1.0}, {"id": "c", "em": 1.0}]
    kb = knowledge_boundary(run, base)
    # a: retrieved, model wrong (tn); b: skipped, model right (tp); c: retrieved, model right (fn)
    assert (kb["n"], kb["missing_in_baseline"], kb["tp"], kb["fp"], kb["fn"], kb["tn"]) == (3, 1, 1, 0, 1, 1)
    assert kb["f1"] == pytest.approx(2 / 3, abs=1e-6)
    assert kb["accuracy"] == pytest.approx(2 / 3, abs=1e-6)
    assert kb["mcc"] == pytest.approx(0.5, abs=1e-6)  # (1*1 - 0) / sqrt(1*2*1*2)


def test_yes_no_mapping():
    assert yes_no("Yes, because it was built in 1887") == "yes"
    assert yes_no("It is not true.") == "no"
    assert yes_no("False") == "no"
    assert yes_no("Paris") is None
    assert score_answer("No, it is not.", "", ["no"], yes_no_dataset=True).em == 1.0
    assert score_answer("No, it is not.", "", ["no"], yes_no_dataset=False).em == 0.0


def test_score_falls_back_to_full_text_when_no_final_answer():
    s = score_answer("", "The bridge is in Lyon", ["Lyon"])
    assert s.scored == "The bridge is in Lyon" and s.em == 0.0 and s.recall == 1.0


def _pred(i, final, gold, retrievals, support=(), found=(), tokens=10, seconds=1.0):
    return {"id": str(i), "answers": gold, "final_answer": final, "prediction": f"So the answer is {final}.",
            "retrievals": retrievals, "support": list(support), "support_found": list(found),
            "generated_tokens": tokens, "seconds": seconds, "em": -1, "f1": -1}


def test_summarize_hand_computed():
    preds = [
        _pred(1, "Lyon", ["Lyon"], 1, ["s1", "s2"], ["s1", "s2"], tokens=10, seconds=1.0),
        _pred(2, "tall stone bridge", ["stone bridge over river"], 3, ["s3", "s4"], ["s4"], tokens=20, seconds=2.0),
        _pred(3, "Paris", ["Rome"], 0, [], [], tokens=30, seconds=6.0),
        _pred(4, "", ["x"], 0, ["s5"], [], tokens=0, seconds=3.0),
    ]
    preds[3]["prediction"] = ""
    s = summarize(preds, dataset_has_support=True, yes_no=False, meta={"method": "m"})
    assert s["n"] == 4 and s["method"] == "m"
    assert s["em"] == pytest.approx(0.25)
    assert s["f1"] == pytest.approx((1 + 2 * (2 / 3) * (2 / 4) / (2 / 3 + 2 / 4)) / 4, abs=1e-6)
    assert s["precision"] == pytest.approx((1 + 2 / 3) / 4, abs=1e-6)
    assert s["recall"] == pytest.approx((1 + 2 / 4) / 4, abs=1e-6)
    assert s["accuracy"] is None
    assert s["retrievals_per_question"] == 1.0
    assert s["generated_tokens_per_question"] == 15.0
    assert s["seconds_per_question"] == 3.0
    # support over the 3 questions naming supporting paragraphs: 1, 1/2, 0
    assert s["support_recall"] == pytest.approx(0.5)
    assert s["support_all"] == pytest.approx(1 / 3, abs=1e-6)
    none = summarize(preds, dataset_has_support=False, yes_no=True)
    assert none["support_recall"] is None and none["support_all"] is None and none["accuracy"] == 0.25
    assert summarize([], True, False)["n"] == 0


def test_context_words_count_what_the_model_read_and_old_records_give_no_mean():
    from dynrag.datasets.loaders import QAExample
    from dynrag.eval.summary import make_record

    example = QAExample(id="q1", question="Where?", answers=["Lyon"], contexts=[], supporting=[])
    answer = {"answer": "Lyon", "final_answer": "Lyon", "retrievals": [
        {"query": "a", "hits": [{"id": "p1", "title": "T", "text": "one two three"}]},
        {"query": "b", "hits": [{"id": "p2", "title": "T", "text": "four  five"}, {"id": "p3", "title": "", "text": ""}]},
    ]}
    record = make_record(example, answer, 0.1, yes_no=False)
    assert record["context_words"] == 5
    assert summarize([record, {**record, "context_words": 1}], False, False)["context_words_per_question"] == 3.0
    old = {k: v for k, v in record.items() if k != "context_words"}
    assert summarize([record, old], False, False)["context_words_per_question"] is None


def test_a_method_that_writes_sub_questions_records_them_with_their_decisions():
    from dynrag.datasets.loaders import QAExample
    from dynrag.eval.summary import make_record

    example = QAExample(id="q1", question="Where?", answers=["Lyon"], contexts=[], supporting=[])
    steps = [{"details": {"subquery": "Who?", "decision": "retrieve"}}, {"details": {"step": 2}},
             {"details": {"subquery": "Where was #1 born?", "decision": "parametric"}}]
    record = make_record(example, {"answer": "Lyon", "final_answer": "Lyon", "steps": steps}, 0.1, yes_no=False)
    assert record["decisions"] == [{"subquery": "Who?", "retrieve": True},
                                   {"subquery": "Where was #1 born?", "retrieve": False}]
    assert "decisions" not in make_record(example, {"answer": "Lyon", "final_answer": "Lyon"}, 0.1, yes_no=False)
