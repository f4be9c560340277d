"""deeprag inference: the narrative loop, both decision modes, limits and the trace (fast)."""

import json

import pytest

from dynrag.corpus.passage import Passage
from dynrag.errors import ConfigError
from dynrag.lm.chat import ChatFrame
from dynrag.methods.deeprag.decision import decision_margin, wants_retrieval
from dynrag.methods.deeprag.narrative import (
    ANSWER,
    FINAL,
    INSTRUCTION,
    RETRIEVE,
    SUBQUERY,
    Narrative,
    NarrativeStep,
    load_exemplars,
    parse_decision,
    parse_line,
)
from dynrag.methods.registry import build_method, parse_options
from dynrag.retrieval.bm25 import BM25Index
from dynrag.methods.deeprag.writer import final_answer_text
from tests.fakes import ScriptedLM
from tests.tiny_models import tiny_llama_lm

QUESTION = "Where was the engineer of the old bridge born?"


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    texts = [
        "The old bridge of Corrow was built in 1887 by the engineer Ada Byrne.",
        "Ada Byrne was born in Lyon and trained as an engineer in Paris.",
        "The harbour museum opened in the new year.",
    ]
    out = tmp_path_factory.mktemp("idx") / "index"
    BM25Index.build([Passage(f"p{i}", f"title {i}", t) for i, t in enumerate(texts)], out, progress=False)
    return BM25Index.load(out, backend="numpy")  # numba's first search compiles for seconds


def last_line(prompt_text: str) -> str:
    """The prompt's unfinished last line ("" right after a newline)."""
    return prompt_text.rsplit("\n", 1)[-1]


def asked(narrative: str) -> int:
    """Sub-questions the model asked in `narrative` (not counting the runner's restatements,
    which follow a passage line)."""
    lines = narrative.split("\n")
    return sum(1 for i, line in enumerate(lines) if line.startswith("Sub-question:") and not (i and lines[i - 1].startswith("[")))


def own_part(prompt_text: str) -> str:
    """The narrative of the question being answered (after the exemplars)."""
    return prompt_text[prompt_text.rindex("Question: ") :]


def scripted(decisions: list[str], subqueries: list[str] | None = None, **kwargs) -> ScriptedLM:
    """A model that asks len(decisions) sub-questions, deciding each as scripted, then answers."""
    subqueries = subqueries or ["Who was the engineer of the old bridge?", "Where was Ada Byrne born?"]

    def reply(text: str) -> str:
        own = own_part(text)
        step = asked(own)
        if text.endswith(FINAL):
            return " Lyon."
        if text.endswith(ANSWER):
            return " Ada Byrne" if step == 1 else " Lyon"
        if last_line(text) == "" and own.rstrip("\n").rsplit("\n", 1)[-1].startswith(SUBQUERY):
            return RETRIEVE if decisions[step - 1] == "retrieve" else f"{ANSWER} from memory {step}"
        if step < len(decisions):
            return f"{SUBQUERY} {subqueries[step % len(subqueries)]}\nmore"
        return f"{FINAL} Lyon.\nQuestion: another"

    return ScriptedLM(reply, **kwargs)


def test_generate_mode_follows_the_models_own_decisions(index):
    lm = scripted(["parametric", "retrieve"])
    answer = build_method("deeprag", lm, index, {"shots": 1}).answer(QUESTION)
    assert answer.final_answer == "Lyon"
    trace = answer.trace
    assert [r.query for r in trace.retrievals] == ["Where was Ada Byrne born?"]
    assert [h.id for h in trace.retrievals[0].hits][0] == "p1"
    decided = [s.details for s in trace.steps if s.kind == "answer"]
    assert [d["decision"] for d in decided] == ["parametric", "retrieve"]
    assert [d["answer"] for d in decided] == ["from memory 1", "Lyon"]
    assert decided[1]["hits"][0] == "p1" and decided[0]["hits"] == []
    # The parametric answer came with the decision: no separate generation for it.
    assert [s.kind for s in trace.steps] == ["subquery", "decision", "answer", "subquery", "decision", "answer", "subquery"]
    # The narrative carries the passages inline, then the answer written with them.
    assert f"{RETRIEVE}\n[1] title 1: Ada Byrne was born in Lyon" in answer.text
    assert answer.text.endswith(f"{FINAL} Lyon.")
    # The answer written after retrieval saw the passages.
    answer_prompt = [p for p in lm.prompts if p.endswith(ANSWER)][-1]
    assert "[1] title 1: Ada Byrne was born in Lyon" in own_part(answer_prompt)


def test_margin_mode_retrieves_when_the_biased_margin_is_positive(index):
    lp = {RETRIEVE: -2.0, ANSWER: -1.5}
    lm = scripted(["parametric", "parametric"], scores=lambda text, cands: [lp[c] for c in cands])
    method = build_method("deeprag", lm, index, {"decision": "margin", "bias": 0.0, "shots": 0})
    decided = [s.details for s in method.answer(QUESTION).trace.steps if s.kind == "answer"]
    assert [d["decision"] for d in decided] == ["parametric", "parametric"]
    assert decided[0]["margin"] == pytest.approx(-0.5)
    assert decided[0]["logprob_retrieve"] == -2.0 and decided[0]["logprob_answer"] == -1.5

    method = build_method("deeprag", lm, index, {"decision": "margin", "bias": 0.75, "shots": 0})
    answer = method.answer(QUESTION)
    decided = [s.details for s in answer.trace.steps if s.kind == "answer"]
    assert [d["decision"] for d in decided] == ["retrieve", "retrieve"]
    assert decided[0]["margin"] == pytest.approx(0.25)
    assert len(answer.trace.retrievals) == 2
    assert "margin +0.250" in answer.trace.retrievals[0].reason
    # The scores were asked for right after the sub-question line.
    scored = [p for p in lm.prompts if p.endswith("\n") and last_line(p.rstrip("\n")).startswith(SUBQUERY)]
    assert len(scored) >= 2


def test_margin_formula_and_threshold():
    assert decision_margin(-1.0, -3.0) == pytest.approx(2.0)
    assert decision_margin(-1.0, -3.0, bias=-2.5) == pytest.approx(-0.5)
    assert wants_retrieval(0.01) and not wants_retrieval(0.0) and not wants_retrieval(-0.2)


def test_margin_mode_needs_a_backend_that_scores_next_tokens(index):
    lm = scripted(["retrieve"])
    with pytest.raises(ConfigError, match="deeprag with decision=margin needs next-token probabilities .*use decision=generate"):
        build_method("deeprag", lm, index, {"decision": "margin"})  # refused when built, before any question


def test_step_limit_ends_the_narrative_and_asks_for_the_final_answer(index):
    lm = scripted(["parametric"] * 10)
    answer = build_method("deeprag", lm, index, {"max_steps": 3, "shots": 0}).answer(QUESTION)
    decided = [s for s in answer.trace.steps if s.kind == "answer"]
    assert len(decided) == 3
    assert answer.trace.steps[-1].kind == "finish"
    assert lm.prompts[-1].endswith(FINAL)
    assert answer.final_answer == "Lyon"


def test_token_budget_ends_the_narrative(index):
    lm = scripted(["parametric"] * 10)
    answer = build_method("deeprag", lm, index, {"max_new_tokens": 12, "shots": 0}).answer(QUESTION)
    generated = sum(s.generated_tokens for s in answer.trace.steps if s.kind != "finish")
    assert generated <= 12
    assert answer.trace.steps[-1].kind == "finish" and answer.final_answer == "Lyon"


def test_a_line_that_is_neither_a_subquestion_nor_an_answer_ends_with_the_final_answer(index):
    lm = ScriptedLM(lambda text: " Lyon." if text.endswith(FINAL) else "I do not know")
    answer = build_method("deeprag", lm, index, {"shots": 0}).answer(QUESTION)
    assert answer.final_answer == "Lyon" and not answer.trace.retrievals
    assert [s.kind for s in answer.trace.steps] == ["subquery", "finish"]


def test_the_final_answer_stops_where_the_answer_phrase_comes_again(index):
    lm = ScriptedLM(lambda text: " Paul Frederick. So the answer is yes." if text.endswith(FINAL) else "I do not know")
    assert build_method("deeprag", lm, index, {"shots": 0}).answer(QUESTION).final_answer == "Paul Frederick"
    assert final_answer_text(" So the answer is Lyon. So the answer is Lyon") == "Lyon"  # an echo first, then the answer
    assert final_answer_text(" 1887.\nSub-question: x") == "1887"


def test_options_are_validated_and_named():
    with pytest.raises(ConfigError, match="decision"):
        parse_options("deeprag", {"decision": "sometimes"})
    with pytest.raises(ConfigError, match="max_steps"):
        parse_options("deeprag", {"max_steps": 0})
    assert parse_options("deeprag", {}).bias == 0.0


def test_shots_default_to_what_a_trained_checkpoint_says(tmp_path, index):
    (tmp_path / "deeprag.json").write_text(json.dumps({"prompt": {"shots": 0}}))
    lm = scripted(["parametric"], name=f"hf:{tmp_path}")
    method = build_method("deeprag", lm, index, {})
    assert method.narrative.shots == 0
    method.answer(QUESTION)
    assert lm.prompts[0].count("Question: ") == 1  # no worked examples
    untrained = build_method("deeprag", scripted(["parametric"]), index, {})
    assert untrained.narrative.shots == len(load_exemplars())


def test_narrative_prompt_layout_and_parsers():
    steps = [
        NarrativeStep("Who built it?", False, "Ada"),
        NarrativeStep("Where was Ada born?", True, "Lyon", (Passage("p1", "Ada", "Ada was born in Lyon."),)),
    ]
    prompt = Narrative(shots=0).prompt("Where was the builder born?", steps)
    own = prompt.text[prompt.text.index("Question:") :]
    assert own == (
        "Question: Where was the builder born?\n"
        "Sub-question: Who built it?\nAnswer: Ada\n"
        "Sub-question: Where was Ada born?\nSearch results:\n[1] Ada: Ada was born in Lyon.\n"
        "Sub-question: Where was Ada born?\nAnswer: Lyon\n"
    )
    names = [s.name for s in prompt.segments]
    assert names == ["instruction", "question", "subquery", "answer", "subquery", "decision", "passages", "restated", "answer"]
    assert prompt.reusable_prefix == prompt.segments[1].start
    assert parse_line("Sub-question: Who?") == ("subquery", "Who?")
    assert parse_line(f"{FINAL} Lyon. Then more") == ("final", "Lyon")
    assert parse_line("Sub-question:   ")[0] == "other"
    assert parse_decision("Search results:") == ("retrieve", "")
    assert parse_decision("Answer: Ada Byrne") == ("parametric", "Ada Byrne")
    assert parse_decision("Sub-question: again")[0] == "other"
    with_shots = Narrative(shots=2).prompt("Q?")
    assert with_shots.text.count("Question: ") == 3
    assert with_shots.reusable_prefix == with_shots.text.index("Question: Q?")


def test_runs_on_a_real_transformers_backend_in_both_modes(index):
    lm = tiny_llama_lm(seed=2)
    for decision in ("generate", "margin"):
        answer = build_method(
            "deeprag", lm, index, {"decision": decision, "shots": 1, "max_steps": 2, "max_new_tokens": 40}
        ).answer(QUESTION)
        decided = [s.details for s in answer.trace.steps if s.kind == "answer"]
        assert len(decided) <= 2
        assert len(answer.trace.retrievals) == sum(d["decision"] == "retrieve" for d in decided)
        if decision == "margin":
            assert all(d["margin"] is not None for d in decided)
        assert answer.to_dict()["final_answer"] == answer.final_answer


def test_the_terminal_rendering_lists_each_subquestion_with_its_decision(index):
    from rich.console import Console

    from dynrag.render import render_answer

    lp = {RETRIEVE: -1.0, ANSWER: -1.5}
    lm = scripted(["retrieve", "retrieve"], scores=lambda text, cands: [lp[c] for c in cands])
    answer = build_method("deeprag", lm, index, {"decision": "margin", "shots": 0}).answer(QUESTION)
    console = Console(record=True, width=200)
    render_answer(console, answer)
    text = console.export_text()
    assert "1. Who was the engineer of the old bridge?  [retrieve +0.50]  Ada Byrne" in text
    assert "2. Where was Ada Byrne born?  [retrieve +0.50]  Lyon" in text


def test_a_question_the_classifier_says_needs_no_retrieval_is_answered_from_memory(index):
    method = build_method("deeprag", scripted(["retrieve", "retrieve"]), index, {"shots": 0})
    method.chain.needs_retrieval = lambda question, trace: False  # what classify=true decided
    answer = method.answer(QUESTION)
    decided = [s.details for s in answer.trace.steps if s.kind == "answer"]
    assert not answer.trace.retrievals
    assert [d["decision"] for d in decided] == ["parametric", "parametric"]
    assert all(d["overruled_by_classifier"] for d in decided)


@pytest.mark.parametrize("mode,retrieves", [("always", True), ("never", False)])
def test_fixed_strategies_retrieve_for_every_subquery_or_for_none(index, mode, retrieves):
    # The model would decide the opposite each time; the fixed strategy never asks it.
    lm = scripted(["parametric" if retrieves else "retrieve"] * 2)
    answer = build_method("deeprag", lm, index, {"decision": mode, "shots": 0}).answer(QUESTION)
    trace = answer.trace
    decided = [s.details for s in trace.steps if s.kind == "answer"]
    assert [d["decision"] for d in decided] == [("retrieve" if retrieves else "parametric")] * 2
    assert [s.kind for s in trace.steps] == ["subquery", "answer", "subquery", "answer", "subquery"]
    assert [d["decision_text"] for d in decided] == ["", ""] and all(d["margin"] is None for d in decided)
    if retrieves:
        assert [r.query for r in trace.retrievals] == [d["subquery"] for d in decided]
        assert all(f"decision={mode}" in r.reason for r in trace.retrievals)
        assert all(d["hits"] for d in decided)
        assert [d["answer"] for d in decided] == ["Ada Byrne", "Lyon"]  # written after the passages
    else:
        assert trace.retrievals == [] and all(d["hits"] == [] for d in decided)
        assert not any(RETRIEVE in own_part(p) for p in lm.prompts)
    # no prompt ended right after a sub-question line, where a decision would be asked for
    assert not any(last_line(p) == "" and last_line(p.rstrip("\n")).startswith(SUBQUERY) for p in lm.prompts)
    assert answer.final_answer == "Lyon"


def test_always_retrieving_still_defers_to_the_query_classifier(index, monkeypatch):
    lm = scripted(["retrieve"] * 2)
    method = build_method("deeprag", lm, index, {"decision": "always", "shots": 0})
    monkeypatch.setattr(method.chain, "needs_retrieval", lambda question, trace: False)
    decided = [s.details for s in method.answer(QUESTION).trace.steps if s.kind == "answer"]
    assert [d["decision"] for d in decided] == ["parametric"] * 2
    assert all(d["overruled_by_classifier"] for d in decided)


FRAME = ChatFrame("<sys>", "</sys><user>", "</user><assistant>\n")


def chat_scripted(decisions: list[str], name: str = "scripted", prompt_style: str = "chat",
                  frame: ChatFrame | None = FRAME) -> ScriptedLM:
    lm = scripted(decisions, name=name)
    lm.prompt_style, lm.chat_frame = prompt_style, frame
    return lm


def test_a_chat_frame_puts_the_narrative_in_the_assistants_turn_and_changes_nothing_else():
    steps = [NarrativeStep("Who built it?", False, "Ada"),
             NarrativeStep("Where was Ada born?", True, "Lyon", (Passage("p1", "Ada", "Ada was born in Lyon."),))]
    plain, chat = Narrative(shots=1).prompt("Q?", steps), Narrative(shots=1, frame=FRAME).prompt("Q?", steps)
    assert chat.text.startswith("<sys>" + INSTRUCTION + "</sys><user>Question: ")  # the exemplar opens the user turn
    assert chat.segments[2].name == "question" and chat.text[chat.segments[2].start:chat.segments[2].end] == (
        "Question: Q?</user><assistant>\n")
    after = lambda p: p.text[p.segments[3].start:]  # noqa: E731  (everything the narrative adds)
    assert after(chat) == after(plain)
    assert [s.name for s in chat.segments] == [s.name for s in plain.segments]
    assert chat.reusable_prefix == chat.segments[2].start
    assert (Narrative().style, Narrative(frame=FRAME).style) == ("plain", "chat")


def test_the_narrative_is_plain_unless_asked_and_a_trained_checkpoint_keeps_its_style(tmp_path, index):
    assert build_method("deeprag", chat_scripted(["retrieve"]), index, {}).narrative.style == "plain"
    method = build_method("deeprag", chat_scripted(["retrieve"]), index, {"narrative": "chat"})
    assert method.narrative.style == "chat"
    assert method.answer(QUESTION).text and method.lm.prompts[0].startswith("<sys>")
    with pytest.raises(ConfigError, match="is asked for a chat-framed narrative, but it has no chat template"):
        build_method("deeprag", chat_scripted(["retrieve"], frame=None), index, {"narrative": "chat"})
    (tmp_path / "deeprag.json").write_text(json.dumps({"prompt": {"shots": 0, "style": "chat"}}))
    trained = build_method("deeprag", chat_scripted(["retrieve"], name=f"hf:{tmp_path}", prompt_style="plain"), index, {})
    assert (trained.narrative.style, trained.narrative.shots) == ("chat", 0)  # hf: loads plain; the record decides
    with pytest.raises(ConfigError, match="was trained on chat-framed narratives, but it has no chat template"):
        build_method("deeprag", chat_scripted(["retrieve"], name=f"hf:{tmp_path}", frame=None), index, {})
    (tmp_path / "deeprag.json").write_text(json.dumps({"prompt": {"shots": 0}}))  # trained before styles
    assert build_method("deeprag", chat_scripted(["retrieve"], name=f"hf:{tmp_path}"), index, {}).narrative.style == "plain"
    with pytest.raises(ConfigError, match="narrative"):
        build_method("deeprag", chat_scripted(["retrieve"]), index, {"narrative": "html"})
