"""Synthesis end to end with a scripted model and a real BM25 index: records, resume, errors."""

import io
import json
import re

import pytest
from rich.console import Console

from dynrag.deeprag.synth import Models, SynthJobOptions, run_synth
from dynrag.deeprag.teachers import phrase_subquery
from dynrag.deeprag.trajectory import read_trajectories
from dynrag.errors import ConfigError
from dynrag.datasets.loaders import load_examples
from dynrag.eval.pool import pool_contexts
from dynrag.io.jsonl import read_jsonl
from dynrag.methods.deeprag.narrative import ANSWER, FINAL, RETRIEVE, SUBQUERY
from dynrag.retrieval.bm25 import BM25Index
from tests.deeprag.conftest import wiki_record, write_wiki
from tests.fakes import ScriptedLM


def own_part(text):
    return text[text.rindex("Question: ") :]


def knowing_model(known_founders: dict[str, str], teacher_lines: bool = False) -> ScriptedLM:
    """Answers from passages when it has them; from memory it knows only some founders.

    With ``teacher_lines`` it also writes sub-questions (two hops) and the final line itself.
    """

    def reply(text):
        own = own_part(text)
        # the step being answered: from its sub-question (not the runner's restatement) to the end
        lines = own.split("\n")
        asked_at = [i for i, l in enumerate(lines) if l.startswith(SUBQUERY) and not (i and lines[i - 1].startswith("["))]
        step_text = "\n".join(lines[asked_at[-1] :]) if asked_at else ""
        answers = re.findall(rf"^{ANSWER} (.*)$", own, flags=re.M)
        if text.endswith(FINAL):
            return f" {answers[-1] if answers else 'nowhere'}."
        if text.endswith(ANSWER):
            if RETRIEVE in step_text:  # read the answer off a passage about the sub-question's subject
                asked = step_text.split("\n", 1)[0]
                subject = re.search(r"Who founded (.+)\?|Where was (.+) born\?", asked)
                if subject.group(1):
                    found = re.search(rf"{re.escape(subject.group(1))} was founded by (.+?) in \d", step_text)
                else:
                    found = re.search(rf"{re.escape(subject.group(2))} was born in (.+?)\.", step_text)
                return f" {found.group(1) if found else 'unknown'}"
            if "Who founded" in step_text:
                thing = step_text.split("Who founded ", 1)[1].split("?")[0]
                return f" {known_founders.get(thing, 'Someone Else')}"
            return " Nowhere Town"
        if teacher_lines:
            thing = own.split("\n", 1)[0][len("Question: Where was the founder of ") :].removesuffix(" born?")
            if len(answers) == 0:
                return f"{SUBQUERY} Who founded {thing}?"
            if len(answers) == 1:
                return f"{SUBQUERY} Where was {answers[0]} born?"
            return f"{FINAL} {answers[-1]}."
        raise AssertionError(f"unexpected prompt end: {text[-60:]!r}")

    return ScriptedLM(reply)


@pytest.fixture
def bench(tmp_path):
    data = write_wiki(tmp_path / "train.json", 6)
    examples = list(load_examples("2wikimultihopqa", data))
    index_dir = tmp_path / "index"
    BM25Index.build(pool_contexts(examples), index_dir, progress=False)
    return data, BM25Index.load(index_dir, backend="numpy")


def request(tmp_path, data, **kw):
    return SynthJobOptions(dataset="2wikimultihopqa", data=data, **{"out": tmp_path / "synth", "teacher": "dataset", **kw})


def test_dataset_teacher_finds_the_cheapest_correct_narratives(tmp_path, bench):
    data, index = bench
    records = [wiki_record(i) for i in range(6)]
    known = {r["evidences"][0][0]: r["evidences"][0][2] for r in records[::2]}  # it knows every other founder
    lm = knowing_model(known)
    summary = run_synth(request(tmp_path, data, max_steps=4, max_nodes=20), progress=False,
                        models=Models(lm, None, index))
    assert summary["questions"] == 6 and summary["found"] == 6 and summary["share_found"] == 1.0
    trajectories = {t.id: t for t in read_trajectories(tmp_path / "synth")}
    for i, r in enumerate(records):
        t = trajectories[r["_id"]]
        # founder known: answer it from memory and retrieve only the birthplace
        assert [s.retrieve for s in t.steps] == ([False, True] if i % 2 == 0 else [True, True])
        assert t.steps[0].subquery == f"Who founded {r['evidences'][0][0]}?"
        assert t.steps[1].subquery == f"Where was {r['evidences'][0][2]} born?"  # #1 = this narrative's answer
        assert t.final_answer == r["answer"]
        assert all(p.text for s in t.steps if s.retrieve for p in s.passages)
    assert summary["retrievals_on_optimal_path"] == pytest.approx(1.5)
    assert summary["retrievals_histogram"] == {"1": 3, "2": 3}
    assert summary["steps_histogram"] == {"2": 6} and summary["share_two_or_more_steps"] == 1.0
    assert summary["by_gold_hops"] == {"2": {"searched": 6, "found": 6}}
    line = json.loads((tmp_path / "synth" / "trajectories.jsonl").read_text().splitlines()[0])
    assert set(line) == {"format", "id", "dataset", "question", "steps", "final_answer", "retrievals", "tree",
                         "generations", "seconds", "select", "narrative"}
    assert line["narrative"] == "plain"  # the scripted model has no chat template
    assert line["select"] == "min" and "correct" not in line  # the default keeps the selected narrative only
    assert "answers" not in line and line["tree"]["expanded"] >= 3


def test_narrative_chat_searches_in_the_targets_template_and_a_resume_in_another_style_is_refused(tmp_path, bench):
    from dynrag.lm.chat import ChatFrame

    data, index = bench
    known = {r["evidences"][0][0]: r["evidences"][0][2] for r in [wiki_record(i) for i in range(6)]}
    lm = knowing_model(known)
    lm.prompt_style, lm.chat_frame = "chat", ChatFrame("<sys>", "</sys><user>", "</user><assistant>\n")
    chat = dict(max_steps=4, max_nodes=20, narrative="chat")
    run_synth(request(tmp_path, data, limit=2, **chat), progress=False, models=Models(lm, None, index))
    assert [t.narrative for t in read_trajectories(tmp_path / "synth")] == ["chat", "chat"]
    assert all(p.startswith("<sys>") for p in lm.prompts)
    with pytest.raises(ConfigError, match="different config.*narrative"):
        run_synth(request(tmp_path, data, max_steps=4, max_nodes=20, limit=4), progress=False, models=Models(lm, None, index))
    with pytest.raises(ConfigError, match="--narrative 'html': choose one of plain, chat"):
        run_synth(request(tmp_path, data, limit=4, **{**chat, "narrative": "html"}), progress=False)
    assert len(read_trajectories(tmp_path / "synth")) == 2  # nothing written is lost


def test_questions_without_a_correct_narrative_are_counted_and_not_searched_again(tmp_path, bench):
    data, index = bench
    never_right = ScriptedLM(lambda text: " Nowhere Town." if text.endswith(FINAL) else " Nowhere Town")
    said = io.StringIO()
    summary = run_synth(request(tmp_path, data, max_nodes=5), progress=False, models=Models(never_right, None, index),
                        console=Console(file=said, width=300))
    assert "--max-nodes 5 is below the whole tree for T = 10, R = 10 (2047 nodes)" in said.getvalue()  # 2Wiki's limits
    assert summary["found"] == 0 and summary["share_found"] == 0.0
    assert summary["skipped"] == {"node_limit": 6}
    assert summary["by_gold_hops"] == {"2": {"searched": 6, "found": 0}} and summary["steps_histogram"] == {}
    assert summary["share_two_or_more_steps"] is None  # no narrative found: no share to give
    skipped = read_jsonl(tmp_path / "synth" / "skipped.jsonl")
    assert [r["id"] for r in skipped] == [f"q{i}" for i in range(6)]
    assert all(r["tree"]["expanded"] == 5 for r in skipped)
    # 5 nodes on 2 hops: root, P, PP, R, PR taken; the 1-retrieval narrative RP was never tried
    assert all(r["cut_at"] == 1 for r in skipped)
    # why nothing was found: the gold answers beside the distinct wrong final answers the search wrote
    assert all(r["wrong_answers"] == ["Nowhere Town"] and r["answers"] and "Nowhere Town" not in r["answers"]
               for r in skipped)
    assert summary["node_budget"] == {"max_nodes": 5, "exhaustive": False, "whole_tree": 2047, "cut": 6,
                                      "cut_at_retrievals": {"1": 6}}
    calls = len(never_right.prompts)
    again = run_synth(request(tmp_path, data, max_nodes=5), progress=False, models=Models(never_right, None, index))
    assert len(never_right.prompts) == calls and again["questions"] == 6  # nothing searched twice
    with pytest.raises(ConfigError, match="different config.*max_nodes"):
        run_synth(request(tmp_path, data, max_nodes=6), progress=False, models=Models(never_right, None, index))
    # a smaller --limit summarises the questions asked for, without searching anything
    fewer = run_synth(request(tmp_path, data, max_nodes=5, limit=4), progress=False, models=Models(never_right, None, index))
    assert fewer["questions"] == 4 and len(never_right.prompts) == calls


def test_target_model_as_teacher_writes_subquestions_and_its_final_line_is_reused(tmp_path, bench):
    data, index = bench
    lm = knowing_model({}, teacher_lines=True)
    summary = run_synth(request(tmp_path, data, teacher="target", limit=2), progress=False, models=Models(lm, None, index))
    assert summary["found"] == 2
    t = read_trajectories(tmp_path / "synth")[0]
    assert [s.retrieve for s in t.steps] == [True, True]
    # the final answer came with the teacher's own final line: no prompt ever ended with the phrase
    assert not any(p.endswith(FINAL) for p in lm.prompts)


def test_a_hop_reader_writes_retrieved_answers_and_contains_saves_the_gold_final_answer(tmp_path, bench):
    data, index = bench
    records = [wiki_record(i) for i in range(2)]
    reader = knowing_model({})  # reads passages well

    def target_reply(text):  # knows nothing, reads nothing, and answers in whole sentences
        if text.endswith(FINAL):
            answers = re.findall(rf"^{ANSWER} (.*)$", own_part(text), flags=re.M)
            return f" I think it is {answers[-1] if answers else 'nowhere'} for sure."
        return " Nowhere Town"

    target = ScriptedLM(target_reply)
    plain = run_synth(request(tmp_path, data, limit=2, max_steps=4, max_nodes=20, out=tmp_path / "em"), progress=False,
                      models=Models(target, None, index))
    assert plain["found"] == 0  # alone, the target never reads a hop right
    summary = run_synth(request(tmp_path, data, limit=2, max_steps=4, max_nodes=20, match="contains",
                                hop_reader="bundled:smollm2"),
                        progress=False, models=Models(target, None, index, hop_reader=reader))
    assert summary["found"] == 2
    manifest = json.loads((tmp_path / "synth" / "manifest.json").read_text())
    assert (manifest["hop_reader"], manifest["match"]) == ("bundled:smollm2", "contains")
    lines = read_jsonl(tmp_path / "synth" / "trajectories.jsonl")
    for line, r in zip(lines, records):
        assert [s["retrieve"] for s in line["steps"]] == [True, True]
        assert line["steps"][0]["answer"] == r["evidences"][0][2]  # the hop reader's reading
        assert line["final_answer"] == r["answer"]  # the gold answer, not the target's sentence
        assert line["written_final_answer"] == f"I think it is {r['answer']} for sure"  # the final line ends at its full stop
    # the target wrote no retrieved answer: every prompt it saw that ends a retrieved step is the reader's
    assert not any(RETRIEVE in p.split(SUBQUERY)[-1] and p.endswith(ANSWER) for p in target.prompts)
    assert any(p.endswith(ANSWER) for p in reader.prompts)


def test_bad_choices_are_named_before_anything_is_loaded(tmp_path, bench):
    data, _ = bench
    with pytest.raises(ConfigError, match="unknown teacher 'oracle'; choose one of: target, dataset"):
        run_synth(request(tmp_path, data, teacher="oracle"), progress=False)
    with pytest.raises(ConfigError, match="--teacher dataset: hotpotqa records carry no gold decomposition"):
        run_synth(SynthJobOptions(dataset="hotpotqa", data=data, out=tmp_path / "o", teacher="dataset"), progress=False)
    with pytest.raises(ConfigError, match="--match 'exact'"):
        run_synth(request(tmp_path, data, match="exact"), progress=False)
    with pytest.raises(ConfigError, match="max_steps and max_nodes"):
        run_synth(request(tmp_path, data, max_nodes=0), progress=False)
    assert not (tmp_path / "synth").exists()


def test_phrasing_gold_steps():
    assert phrase_subquery("Harbour Mill >> director", []) == "Who directed Harbour Mill?"
    assert phrase_subquery("#1 >> place of birth", ["Ada Byrne"]) == "Where was Ada Byrne born?"
    assert phrase_subquery("#1 >> twinned with", ["Lyon"]) == "What is the twinned with of Lyon?"
    assert phrase_subquery("Who was the first head of #1 ?", ["North School"]) == "Who was the first head of North School ?"
    assert phrase_subquery("Is #2 older than #1?", ["1887"]) == "Is #2 older than 1887?"  # unknown reference kept


def test_the_default_budget_is_the_whole_tree_and_says_nothing(tmp_path, bench):
    data, index = bench
    never_right = ScriptedLM(lambda text: " Nowhere Town." if text.endswith(FINAL) else " Nowhere Town")
    said = io.StringIO()
    summary = run_synth(request(tmp_path, data, limit=1), progress=False, models=Models(never_right, None, index),
                        console=Console(file=said, width=300))
    assert summary["skipped"] == {"exhausted": 1}  # two hops: every narrative was tried
    # the whole tree under 2Wiki's limits (10 sub-questions, 10 retrievals), though two hops use little of it
    assert summary["node_budget"] == {"max_nodes": 2047, "exhaustive": True, "whole_tree": 2047, "cut": 0,
                                      "cut_at_retrievals": {}}
    manifest = json.loads((tmp_path / "synth" / "manifest.json").read_text())
    assert (manifest["max_nodes"], manifest["max_steps"], manifest["max_retrievals"]) == (2047, 10, 10)
    assert "--max-nodes" not in said.getvalue()


def test_found_by_gold_hops_counts_only_searched_questions_with_a_decomposition():
    from dynrag.datasets.loaders import QAExample
    from dynrag.deeprag.synth_summary import by_gold_hops

    def ex(qid, hops):
        return QAExample(qid, f"question {qid}?", ["x"], decomposition=[f"step {i}" for i in range(hops)])

    examples = [ex("a", 2), ex("b", 2), ex("c", 3), ex("d", 0), ex("e", 4)]  # d has none; e not searched yet
    table = by_gold_hops(examples, found_ids={"a", "c", "d"}, searched_ids={"a", "b", "c", "d"})
    assert table == {"2": {"searched": 2, "found": 1}, "3": {"searched": 1, "found": 1}}
