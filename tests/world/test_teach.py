"""`dynrag world teach`: the example builder (phrasings, shuffling, what never enters training) and a
two-step run on the tiny random model (checkpoint, log, HF directory, re-probe, relabelled world)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from rich.console import Console

from dynrag.io.jsonl import read_jsonl
from dynrag.world.bank import BANK, RELATIONS
from dynrag.world.entities import Fact, generate
from dynrag.world.knowledge import Knowledge
from dynrag.world.make import make_world
from dynrag.world.questions import FICTIONAL, assign_splits
from dynrag.world.teach_probe import relabel, truth
from dynrag.world.teach_text import (
    PROBE, REPLAY_QA, TRAIN_QA, candidates, choose, epoch_examples, probe_questions, statement_templates, statements,
    train_questions,
)
from tests.cli_inprocess import run_in_process
from tests.tiny_models import save_tiny_llama
from tests.world.fixtures import TINY

QUIET = Console(stderr=True, quiet=True)


@pytest.fixture(scope="module")
def tiny_world(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("world")
    make_world(TINY, out, Knowledge())
    return out


def test_paraphrases_read_as_written():
    fact = Fact("person-001:profession", "person-001", "profession", "engineer")
    assert probe_questions(fact, "Ava Zorl") == ("What did Ava Zorl do for a living?", "What was the trade of Ava Zorl?",
                                                 "Ava Zorl earned a living as what?")
    assert train_questions(fact, "Ava Zorl")[0] == "Name the profession of Ava Zorl."
    assert "By trade, {s} was {a} {o}." in statement_templates("profession")
    write_up = statements(generate(TINY), [fact], random.Random(0), 1)[0]
    assert write_up.given == "" and "Ava" not in write_up.learned  # the subject's name comes from the world
    name = generate(TINY).by_id["person-001"].name
    assert write_up.learned.startswith(name) or name in write_up.learned
    assert "an engineer" in write_up.learned


def test_phrasings_are_disjoint_from_the_world_questions_and_the_probe():
    world_questions = {FICTIONAL[r][0] for r in FICTIONAL}
    bank_probe = {p for r in RELATIONS.values() for p in (*r.probe, r.held_out)}
    for relation in FICTIONAL:
        probe, train = set(PROBE[relation]), set(TRAIN_QA[relation])
        assert len(probe) == 3 and len(train) >= 3
        assert not probe & train and not (probe | train) & (world_questions | bank_probe)
    assert set(REPLAY_QA) == set(RELATIONS) and not set(REPLAY_QA.values()) & bank_probe


def test_taught_entities_start_only_train_questions_and_too_many_is_an_error():
    world = generate(TINY)
    split_of = assign_splits(world)
    pool = candidates(world)
    assert pool and all(split_of[e.id] == "train" and not e.real and not e.distractor for e in pool)
    taught = choose(world, 0, entities=2)
    assert {f.subject for f in taught} <= {e.id for e in pool} and len({f.subject for f in taught}) == 2
    assert choose(world, 0, entities=2) == taught and len(choose(world, 0, facts=3)) == 3
    with pytest.raises(ValueError, match="only"):
        choose(world, 0, entities=len(pool) + 1)


def test_no_dev_or_test_question_or_probe_phrasing_in_training_and_shuffling_is_seeded(tiny_world):
    world = generate(TINY)
    taught = choose(world, 0, entities=2)
    train = read_jsonl(tiny_world / "train.jsonl", whole=True)
    known = [f for f in BANK if f.relation == "capital"][:3]
    one = epoch_examples(world, taught, train, 0, 0, 4, 0.5, known, 1.0)
    assert one == epoch_examples(world, taught, train, 0, 0, 4, 0.5, known, 1.0)
    assert one != epoch_examples(world, taught, train, 0, 1, 4, 0.5, known, 1.0)  # a new epoch: new write-ups and order
    kinds = {e.kind for e in one}
    assert kinds == {"statement", "qa", "reading", "replay"}
    assert f"Question: Tell me the capital of {known[0].subject}.\nAnswer: {known[0].answer}" in {e.text for e in one}
    text = "\n".join(e.text for e in one)
    held = [r["question"] for s in ("dev", "test") for r in read_jsonl(tiny_world / f"{s}.jsonl", whole=True)]
    held += [q for f in taught for q in probe_questions(f, world.by_id[f.subject].name)]
    assert held and not [q for q in held if q in text]
    reading_subjects = {e.given.split("Question: ")[1].removesuffix("\nAnswer:") for e in one if e.kind == "reading"}
    assert reading_subjects <= {r["question"] for r in train}


def test_relabelling_sets_known_from_the_taught_verdicts():
    record = {"question_decomposition": [{"fact": "a", "real": False, "known": False},
                                         {"fact": "real:x", "real": True, "known": True}],
              "world": {"needs_retrieval": True}}
    out = relabel(record, {"a": "known", "real:x": "known"})
    assert [h["known"] for h in out["question_decomposition"]] == [True, True]
    assert out["world"]["needs_retrieval"] is False
    assert relabel(record, {"real:x": "left_out"})["world"]["needs_retrieval"] is True  # "a" was not taught
    assert truth("left_out", False) is None and truth(None, True) is None and truth(None, False) is False


def _teach(world: Path, out: Path, model: Path, *extra: str):
    return run_in_process("world", "teach", "--world", world, "--out", out, "--model", f"hf:{model}", "--entities", "1",
                          "--epochs", "2", "--save-every", "1", "--option", "pack_tokens=16", "--no-progress", *extra)


def test_a_two_step_run_writes_the_model_log_and_knowledge(tiny_world, tmp_path):
    model = save_tiny_llama(tmp_path / "tiny")
    out = tmp_path / "taught"
    r = _teach(tiny_world, out, model, "--max-steps", "2")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["steps"] == 2 and report["taught"] >= 2
    assert [json.loads(line)["step"] for line in (out / "train_log.jsonl").read_text().splitlines()] == [1, 2]
    assert (out / "model.safetensors").exists() and (out / "loss.png").exists() and not (out / "checkpoint").exists()
    meta = json.loads((out / "deeprag.json").read_text())
    assert meta["complete"] and meta["stage"] == "teach" and "prompt" not in meta
    knowledge = json.loads((out / "world" / f"knowledge-hf_{str(out).strip('/').replace('/', '_')}.json").read_text())
    taught = [k for k, v in knowledge["facts"].items() if v.get("taught")]
    assert sorted(taught) == sorted(meta["taught"]) and knowledge["teach"]["taught"] == len(taught)
    manifest = json.loads((out / "world" / "manifest.json").read_text())
    assert manifest["model"] == f"hf:{out}" and manifest["taught"]["facts"] == meta["taught"]
    assert (out / "world" / "corpus.jsonl").read_bytes() == (tiny_world / "corpus.jsonl").read_bytes()


@pytest.mark.slow  # over a second of CPU: `make test` runs it, `make test-fast` does not
def test_a_killed_run_resumes_without_duplicated_log_lines(tiny_world, tmp_path, monkeypatch):
    import dynrag.world.teach as teach

    model = save_tiny_llama(tmp_path / "tiny")
    out = tmp_path / "taught"
    real = teach.row_loss
    calls = []

    def dies_on_the_third(*args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(teach, "row_loss", dies_on_the_third)
    r = _teach(tiny_world, out, model, "--max-steps", "3")
    assert r.returncode != 0 and (out / "checkpoint" / "state.json").exists()
    monkeypatch.setattr(teach, "row_loss", real)
    r = _teach(tiny_world, out, model, "--max-steps", "3")
    assert r.returncode == 0, r.stderr
    assert [json.loads(line)["step"] for line in (out / "train_log.jsonl").read_text().splitlines()] == [1, 2, 3]


def test_bad_world_and_too_many_entities_are_one_line(tiny_world, tmp_path):
    missing = run_in_process("world", "teach", "--world", tmp_path / "none", "--out", tmp_path / "o")
    assert missing.returncode == 1 and "manifest.json" in missing.stderr and "Traceback" not in missing.stderr
    many = run_in_process("world", "teach", "--world", tiny_world, "--out", tmp_path / "o", "--entities", "99")
    assert many.returncode == 1 and "--entities 99" in many.stderr and "train-split" in many.stderr
    both = run_in_process("world", "teach", "--world", tiny_world, "--out", tmp_path / "o", "--entities", "1", "--facts", "1")
    assert both.returncode == 1 and "one of them" in both.stderr
    bad = run_in_process("world", "teach", "--world", tiny_world, "--out", tmp_path / "o", "--option", "nope=1")
    assert bad.returncode == 1 and "nope" in bad.stderr
