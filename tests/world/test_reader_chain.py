"""`dynrag world reader --style chain`: multi-hop examples in the methods' own prompt, one sentence a hop,
the passage shown only for hops the model does not know; `--style answer` is the reader as it was; and
`world check --chains` counts the answers that write a sentence per hop."""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from dynrag.errors import ConfigError
from dynrag.methods.prompting import PromptBuilder
from dynrag.registry import parse_model
from dynrag.world.chain_text import chain_example, chain_hops, chain_target, methods_builder
from dynrag.world.check import run_check
from dynrag.world.entities import WorldOptions, generate
from dynrag.world.knowledge import Knowledge
from dynrag.world.make import fact_relations, knowledge_path, make_world
from dynrag.world.reader import ReaderOptions, WorldReaderJobOptions, invented_names, load_training_world, reader_examples, run_reader
from tests.cli_inprocess import run_in_process
from tests.fakes import ScriptedLM
from tests.tiny_models import save_tiny_llama
from tests.world.fixtures import TINY

QUIET = Console(stderr=True, quiet=True)
TRAIN_SEEDS = (11, 12)


def probed_world(options: WorldOptions, out: Path) -> Path:
    """A world as if probed by a model that knows every real fact (its knowledge file included)."""
    verdicts = {f.id: "known" for f in generate(options).facts if f.real}
    out.mkdir(parents=True, exist_ok=True)
    knowledge_path(out, "scripted").write_text(json.dumps(
        {"model": "scripted", "facts": {fid: {"verdict": v} for fid, v in verdicts.items()}}))
    make_world(options, out, Knowledge("scripted", verdicts))
    return out


@pytest.fixture(scope="module")
def worlds(tmp_path_factory) -> list:
    return [load_training_world(probed_world(TINY.model_copy(update={"seed": s}), tmp_path_factory.mktemp(f"p{s}")))
            for s in TRAIN_SEEDS]


@pytest.fixture(scope="module")
def seed7(tmp_path_factory) -> Path:
    return probed_world(TINY, tmp_path_factory.mktemp("seed7"))


def record_of(world: Path, qid: str) -> dict:
    for split in ("train", "dev", "test"):
        for line in (world / f"{split}.jsonl").read_text().splitlines():
            if json.loads(line)["id"] == qid:
                return json.loads(line)
    raise KeyError(qid)


def test_a_known_and_an_unknown_hop_give_one_sentence_each_and_only_the_unknown_hops_passage(seed7):
    record = record_of(seed7, "w7-train-0056")  # the capital of the country an invented town lies in
    assert record["question"] == "Name the capital city of the country where Deibleik lies."
    town, country = record["question_decomposition"]
    assert (town["known"], country["known"]) == (False, True)
    example = chain_example(record, fact_relations(seed7), methods_builder(), 0, 1, random.Random(0))
    assert example.kind == "chain"
    assert example.learned == (" Deibleik is a town in Ukraine. The seat of government of Ukraine is Kyiv. "
                               "So the answer is Kyiv.")
    town_passage = record["paragraphs"][town["paragraph_support_idx"]]["paragraph_text"]
    country_passage = record["paragraphs"][country["paragraph_support_idx"]]["paragraph_text"]
    assert town_passage in example.given and country_passage not in example.given
    # The prompt the methods build for --dataset world: its worked examples, documents, the question.
    musique = PromptBuilder.for_dataset("musique")
    assert example.given.startswith(musique.exemplar_text()) and "\n\nDocuments:\n[1] " in example.given
    assert example.given.endswith(f"\n\nQuestion: {record['question']}\nAnswer:")

    # Started after the first hop: the known hop is written from memory, with no document at all.
    partial = chain_example(record, fact_relations(seed7), methods_builder(), 1, 1, random.Random(0))
    assert partial.kind == "chain_partial" and "Documents:" not in partial.given
    assert partial.given.endswith(f"Question: {record['question']}\nAnswer: Deibleik is a town in Ukraine.")
    assert partial.learned == " The seat of government of Ukraine is Kyiv. So the answer is Kyiv."


def test_a_partial_example_shows_only_the_passages_of_the_hops_left_to_write(seed7):
    relations = fact_relations(seed7)
    records = [json.loads(line) for line in (seed7 / "train.jsonl").read_text().splitlines()]
    invented = [r for r in records if len(r["question_decomposition"]) == 2
                and not any(h["real"] for h in r["question_decomposition"])]
    assert invented
    for record in invented:
        first, second = (record["paragraphs"][h["paragraph_support_idx"]] for h in record["question_decomposition"])
        example = chain_example(record, relations, methods_builder(), 1, 0, random.Random(0))
        hops = chain_hops(record, relations)
        assert example.given.endswith(f"Answer: {hops[0].sentence}")
        assert example.learned == f" {hops[1].sentence} So the answer is {record['answer']}."
        documents = example.given.split("\n\nDocuments:\n", 1)[1].split("\n\nQuestion: ", 1)[0]
        assert second["paragraph_text"] in documents
        if first["idx"] != second["idx"]:
            assert first["paragraph_text"] not in documents


def test_chain_examples_never_name_the_test_world_and_come_beside_reading_and_replay(worlds):
    test_world = generate(TINY)
    examples, counts = reader_examples(worlds, None, ReaderOptions(others=1), test_world, epoch=0)
    assert counts["chain"] > 0 and counts["chain_partial"] > 0 and counts["reading"] > 0 and counts["replay"] > 0
    names = invented_names(test_world)
    assert not any(name in ex.text for ex in examples for name in names)
    assert all(ex.learned.endswith(".") and " So the answer is " in ex.learned for ex in examples
               if ex.kind.startswith("chain"))
    # Tested against one of its own training worlds, every chain example names it and is dropped.
    own = generate(TINY.model_copy(update={"seed": TRAIN_SEEDS[0]}))
    leaky, leaky_counts = reader_examples(worlds[:1], None, ReaderOptions(), own, epoch=0)
    assert leaky_counts["chain"] == leaky_counts["chain_partial"] == 0
    assert not any(ex.kind.startswith("chain") for ex in leaky)


def test_the_answer_style_builds_the_examples_of_the_reader_before_styles(worlds):
    test_world = generate(TINY)
    answer, counts = reader_examples(worlds, None, ReaderOptions(others=1, style="answer"), test_world, epoch=0)
    assert list(counts) == ["reading", "replay", "dropped_for_naming_the_test_world"]
    # The digest of what the reader built before it had styles, on these very worlds and options;
    # should the world's own generator change, recompute it from the answer style's examples.
    digest = hashlib.sha256(json.dumps([[e.kind, e.given, e.learned] for e in answer]).encode()).hexdigest()
    assert digest == "8ffc8c9b299b5d31f428820ab5d671f5fee0ad6484ea11e964a36ca01a289570"
    chain, _ = reader_examples(worlds, None, ReaderOptions(others=1), test_world, epoch=0)
    assert Counter(answer) == Counter(ex for ex in chain if not ex.kind.startswith("chain"))


def test_a_bad_style_is_refused_naming_the_choices(tmp_path):
    out = tmp_path / "reader"
    r = run_in_process("world", "reader", "--out", out, "--style", "steps", "--no-progress")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == ["error: --style steps: choose one of chain, answer"]
    assert not out.exists()
    with pytest.raises(ConfigError, match="unknown option 'chain_length'"):
        parse_model(ReaderOptions, {"chain_length": 2}, "world reader")


@pytest.mark.slow  # trains or tunes end to end: the full suite's, not the quick loop's
def test_a_chain_reader_trains_records_its_style_and_refuses_another_on_the_same_out(tmp_path):
    model = save_tiny_llama(tmp_path / "tiny")
    out = tmp_path / "reader"
    request = WorldReaderJobOptions(out=out, seeds=TRAIN_SEEDS, model=f"hf:{model}", avoid=TINY,
                                    options=ReaderOptions(max_steps=2, pack_tokens=64))
    report = run_reader(request, console=QUIET, progress=False)
    meta = json.loads((out / "deeprag.json").read_text())
    assert report["steps"] == 2 and meta["style"] == "chain" and meta["options"]["style"] == "chain"
    assert meta["examples_per_epoch"]["chain"] + meta["examples_per_epoch"]["chain_partial"] > 0
    answer = WorldReaderJobOptions(out=out, seeds=TRAIN_SEEDS, model=f"hf:{model}", avoid=TINY,
                                   options=ReaderOptions(max_steps=2, pack_tokens=64, style="answer"))
    with pytest.raises(ConfigError, match="holds a reader of style chain, not answer"):
        run_reader(answer, console=QUIET, progress=False)


def test_check_counts_the_answers_that_write_a_sentence_per_hop(seed7):
    dev = [json.loads(line) for line in (seed7 / "dev.jsonl").read_text().splitlines()]
    relations = fact_relations(seed7)
    chains = {r["question"]: chain_target(chain_hops(r, relations), r["answer"], "So the answer is")
              for r in dev if len(r["question_decomposition"]) >= 2}
    answers = {r["question"]: r["answer"] for r in dev}

    def question_of(prompt: str) -> str:
        return prompt.rsplit("Question: ", 1)[1].split("\n", 1)[0]

    def chain_reader(prompt: str) -> str:
        q = question_of(prompt)
        return chains.get(q, f" {answers.get(q, 'x')}")

    def at_once(prompt: str) -> str:
        q = question_of(prompt)
        return f" {answers.get(q, 'x')}. So the answer is {answers.get(q, 'x')}." if q in chains else f" {answers.get(q, 'x')}"

    report = run_check(ScriptedLM(chain_reader), "scripted", seed7, Console(quiet=True), progress=False, chains=True)
    assert report["chains"]["n"] == len(chains) > 0
    assert report["chains"]["sentence_per_hop"] == 1.0 and report["chains"]["em"] == 1.0
    saved = json.loads((seed7 / "check-scripted.json").read_text())
    assert saved["chains"] == report["chains"] and sum(i["group"] == "chain" for i in saved["items"]) == len(chains)
    once = run_check(ScriptedLM(at_once), "scripted", seed7, Console(quiet=True), progress=False, chains=True)
    assert once["chains"]["sentence_per_hop"] == 0.0 and once["chains"]["em"] == 1.0
    plain = run_check(ScriptedLM(at_once), "scripted", seed7, Console(quiet=True), progress=False)
    assert "chains" not in plain
