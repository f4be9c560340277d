"""The probe (verdicts, resuming after a kill) and `world check`, with a scripted model."""

from __future__ import annotations

import json
import re
from pathlib import Path

from rich.console import Console

from dynrag.world.bank import BY_ID, phrasings
from dynrag.lm.chat import ChatFrame
from dynrag.world.check import reading_prompt, run_check
from dynrag.world.knowledge import Knowledge
from dynrag.world.make import make_world
from dynrag.world.probe import closed_book_prompt, is_correct, probe_world, short_answer

from tests.fakes import ScriptedLM
from tests.world.fixtures import TINY

FACTS = [BY_ID["real:capital:France"], BY_ID["real:capital:Australia"], BY_ID["real:symbol:iron"]]


def last_question(prompt: str) -> str:
    return prompt.rsplit("Question: ", 1)[1].split("\n", 1)[0]


def oracle(prompt: str) -> str:
    """Knows France's capital in every phrasing, Australia's never, iron's in one phrasing of three."""
    q = last_question(prompt)
    if "France" in q:
        return " Paris, of course\nQuestion:"
    if "Australia" in q:
        return " Sydney"
    return " Fe" if q.startswith("What is") else " Ir"


def test_short_answers_and_matching():
    assert short_answer(" Paris, France.\nQuestion: x") == "Paris"
    assert short_answer("Answer: Paris.") == "Paris"  # a chat model repeating the exemplars' label
    assert is_correct(" the euro.", ["euro"]) and not is_correct(" Sydney", ["Canberra"])
    assert is_correct(" Rupees", ["rupee"]) and is_correct(" Paris", ["Paris"]) and not is_correct(" Pari", ["Paris"])


def test_verdicts_are_scored_again_from_the_saved_generations(tmp_path: Path):
    log = tmp_path / "probe-scripted.jsonl"
    fact = BY_ID["real:currency:Thailand"]
    # Saved when "Thai baht" was not yet an alias: marked wrong then, right now.
    log.write_text("".join(json.dumps({"fact": fact.id, "phrasing": i, "question": q, "prediction": " Thai baht",
                                       "correct": False}) + "\n" for i, q in enumerate(phrasings(fact))))
    lm = ScriptedLM(oracle)
    record = probe_world(lm, "scripted", [fact], tmp_path, Console(quiet=True), progress=False)
    assert lm.prompts == [] and record["facts"][fact.id]["verdict"] == "known"


def test_verdicts_of_three_phrasings(tmp_path: Path):
    record = probe_world(ScriptedLM(oracle), "scripted", FACTS, tmp_path, Console(quiet=True), progress=False)
    verdicts = {k: v["verdict"] for k, v in record["facts"].items()}
    assert verdicts == {"real:capital:France": "known", "real:capital:Australia": "unknown",
                        "real:symbol:iron": "left_out"}
    assert record["counts"] == {"known": 1, "unknown": 1, "left_out": 1}
    assert json.loads((tmp_path / "knowledge-scripted.json").read_text()) == record


def test_a_killed_probe_resumes_without_asking_answered_questions_again(tmp_path: Path):
    log = tmp_path / "probe-scripted.jsonl"
    first = {"fact": "real:capital:France", "phrasing": 0, "question": phrasings(FACTS[0])[0],
             "prediction": " Paris", "correct": True}
    # One answer on disk, then a line torn by kill -9.
    log.write_text(json.dumps(first) + "\n" + '{"fact": "real:capital:Fra')
    lm = ScriptedLM(oracle)
    probe_world(lm, "scripted", FACTS, tmp_path, Console(quiet=True), progress=False)
    asked = [last_question(p) for p in lm.prompts]
    assert len(asked) == 8 and phrasings(FACTS[0])[0] not in asked
    lines = log.read_text().splitlines()
    assert len(lines) == 9 and all(json.loads(line) for line in lines)  # the torn line is gone
    again = ScriptedLM(oracle)
    probe_world(again, "scripted", FACTS, tmp_path, Console(quiet=True), progress=False)
    assert again.prompts == []


def test_check_measures_known_unknown_and_reading(tmp_path: Path):
    from dynrag.world.entities import generate

    real = [f.id for f in generate(TINY).facts if f.real]
    make_world(TINY, tmp_path, Knowledge("scripted", {fid: "known" for fid in real}))
    answers = {}
    for line in (tmp_path / "dev.jsonl").read_text().splitlines():
        r = json.loads(line)
        answers[r["question"]] = r["answer"]

    def model(prompt: str) -> str:
        q = last_question(prompt)
        if "Passage:" in prompt.rsplit("Question: ", 1)[0].rsplit("\n\n", 1)[-1]:
            return " " + answers[q]  # reads the passage it was given
        return " " + answers[q] if q.startswith("Name the") else " nobody"  # knows real facts only

    report = run_check(ScriptedLM(model), "scripted", tmp_path, Console(quiet=True), progress=False)
    groups = report["groups"]
    assert groups["known"]["n"] > 0 and groups["known"]["em"] == 1.0 and groups["known"]["met"]
    assert groups["unknown"]["n"] > 0 and groups["unknown"]["em"] == 0.0
    assert groups["reading"]["n"] == groups["unknown"]["n"] and groups["reading"]["em"] == 1.0
    saved = json.loads((tmp_path / "check-scripted.json").read_text())
    assert saved["groups"] == groups
    assert all(re.match(r"w7-dev-", item["id"]) for item in saved["items"])


def test_a_probed_world_is_the_same_bytes_twice(tmp_path: Path):
    from dynrag.world.entities import generate
    from dynrag.world.make import read_knowledge

    facts = [BY_ID[f.id] for f in generate(TINY).facts if f.real]
    for name in ("a", "b"):
        probe_world(ScriptedLM(oracle), "scripted", facts, tmp_path / name, Console(quiet=True), progress=False)
        knowledge = read_knowledge(tmp_path / name / "knowledge-scripted.json")
        make_world(TINY, tmp_path / name, knowledge)
    for path in sorted((tmp_path / "a").iterdir()):
        assert path.read_bytes() == (tmp_path / "b" / path.name).read_bytes(), path.name
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["model"] == "scripted" and "knowledge-scripted.json" in manifest["sha256"]


def test_a_knowledge_file_without_verdicts_is_an_error_naming_it(tmp_path: Path):
    import pytest

    from dynrag.errors import DataError
    from dynrag.world.make import read_knowledge

    path = tmp_path / "knowledge-x.json"
    path.write_text(json.dumps({"model": "x", "facts": {"real:capital:Peru": {"verdict": "maybe"}}}))
    with pytest.raises(DataError, match=r"knowledge-x\.json: fact 'real:capital:Peru' has no verdict among known"):
        read_knowledge(path)


FRAME = ChatFrame("<sys>", "</sys><user>", "</user><bot>")


def test_prompts_are_plain_few_shot_text_or_the_same_parts_in_a_chat_frame():
    plain = closed_book_prompt("Who wrote Emma?")
    assert plain.startswith("Answer each question with a short answer.\n\nQuestion: What is the capital of Japan?\n"
                            "Answer: Tokyo\n\n")
    assert plain.endswith("Question: Who wrote Emma?\nAnswer:")
    chat = closed_book_prompt("Who wrote Emma?", FRAME)
    assert chat.startswith("<sys>Answer each question with a short answer.</sys><user>Question: What is the capital")
    assert chat.endswith("Question: Who wrote Emma?</user><bot>Answer:")
    assert chat.replace("<sys>", "").replace("</sys><user>", "\n\n").replace("</user><bot>", "\n") == plain
    read = reading_prompt("Emma is by Jane Austen.", "Who wrote Emma?", FRAME)
    assert read.startswith("<sys>Answer each question from its passage") and read.endswith(
        "Passage: Emma is by Jane Austen.\nQuestion: Who wrote Emma?</user><bot>Answer:")


def test_a_chat_model_is_probed_and_checked_in_its_chat_frame(tmp_path: Path):
    seen = []

    def model(prompt: str) -> str:
        seen.append(prompt)
        return " Paris" if "France" in prompt.rsplit("Question: ", 1)[1] else " Sydney"

    lm = ScriptedLM(model)
    lm.prompt_style, lm.chat_frame = "chat", FRAME
    record = probe_world(lm, "scripted", FACTS[:2], tmp_path, Console(quiet=True), progress=False)
    assert len(seen) == 6 and all(p.startswith("<sys>") and p.endswith("</user><bot>Answer:") for p in seen)
    assert {k: v["verdict"] for k, v in record["facts"].items()} == {"real:capital:France": "known",
                                                                     "real:capital:Australia": "unknown"}
