"""`dynrag world reader`: the training examples come from worlds of other seeds and never name the test
world's invented entities; a two-step run on the tiny random model writes a loadable reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from dynrag.errors import ConfigError
from dynrag.world.entities import generate
from dynrag.world.knowledge import Knowledge
from dynrag.world.make import make_world
from dynrag.world.reader import (
    ReaderOptions, WorldReaderJobOptions, check_seeds, drop_leaks, invented_names, load_training_world, reader_examples, run_reader,
)
from dynrag.world.teach_text import TextExample
from tests.cli_inprocess import run_in_process
from tests.tiny_models import save_tiny_llama
from tests.world.fixtures import TINY

QUIET = Console(stderr=True, quiet=True)
TRAIN_SEEDS = (11, 12)


@pytest.fixture(scope="module")
def training_worlds(tmp_path_factory) -> list:
    dirs = []
    for seed in TRAIN_SEEDS:
        out = tmp_path_factory.mktemp(f"seed-{seed}")
        make_world(TINY.model_copy(update={"seed": seed}), out, Knowledge())
        dirs.append(load_training_world(out))
    return dirs


def test_an_example_naming_an_avoided_name_is_dropped_and_counted():
    examples = [TextExample("reading", "Passage: Orla Venn ran the mill.\nQuestion: Who ran the mill?\nAnswer:", " Orla Venn"),
                TextExample("replay", "Question: What is the capital of Peru?\nAnswer:", " Lima")]
    kept, dropped = drop_leaks(examples, ["Orla Venn"])
    assert kept == examples[1:] and dropped == 1


def test_no_training_example_names_an_invented_entity_of_the_test_world(training_worlds):
    test_world = generate(TINY)
    names = invented_names(test_world)
    examples, counts = reader_examples(training_worlds, None, ReaderOptions(), test_world, epoch=0)
    assert counts["reading"] > 10 and not any(name in ex.text for ex in examples for name in names)
    # The guard is what keeps them out: tested against one of its own training worlds, every
    # reading example names that world's entities and is dropped.
    own = generate(TINY.model_copy(update={"seed": TRAIN_SEEDS[0]}))
    leaky, leaky_counts = reader_examples(training_worlds[:1], None, ReaderOptions(), own, epoch=0)
    assert leaky_counts["reading"] == 0 and leaky_counts["dropped_for_naming_the_test_world"] > 10
    assert not any(ex.kind == "reading" for ex in leaky)


def test_reading_examples_hold_the_gold_passage_and_the_answer(training_worlds):
    examples, _ = reader_examples(training_worlds, None, ReaderOptions(others=1), generate(TINY), epoch=0)
    reading = [ex for ex in examples if ex.kind == "reading"]
    assert all(ex.given.count("Passage: ") in (1, 2) and ex.given.endswith("Answer:") for ex in reading)
    assert all(ex.learned.strip() and ex.learned.strip() in ex.given for ex in reading)
    again, _ = reader_examples(training_worlds, None, ReaderOptions(others=1), generate(TINY), epoch=0)
    other_epoch, _ = reader_examples(training_worlds, None, ReaderOptions(others=1), generate(TINY), epoch=1)
    assert again == examples and other_epoch != examples


def test_the_test_seed_is_refused_as_a_training_seed():
    with pytest.raises(ConfigError, match="seed 7 is the test world's"):
        check_seeds([7, 8], TINY)
    r = run_in_process("world", "reader", "--out", "unused", "--seeds", "1,2")
    assert r.returncode == 1 and "seed 1 is the test world's" in r.stderr and "Traceback" not in r.stderr
    bad = run_in_process("world", "reader", "--out", "unused", "--seeds", "a,b")
    assert bad.returncode == 1 and "--seeds a,b" in bad.stderr


def test_a_seed_given_twice_is_refused_before_anything_is_made(tmp_path):
    out = tmp_path / "reader"
    r = run_in_process("world", "reader", "--out", out, "--seeds", "101,102,101", "--no-progress")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        "error: --seeds 101,102,101: seed 101 is given twice (each seed names one world)"]
    assert not out.exists()


@pytest.mark.slow  # over a second of CPU: `make test` runs it, `make test-fast` does not
def test_a_two_step_run_makes_its_worlds_and_writes_a_reader(tmp_path):
    model = save_tiny_llama(tmp_path / "tiny")
    out = tmp_path / "reader"
    request = WorldReaderJobOptions(out=out, seeds=TRAIN_SEEDS, model=f"hf:{model}", avoid=TINY,
                                    options=ReaderOptions(max_steps=2, pack_tokens=64, save_every=1))
    report = run_reader(request, console=QUIET, progress=False)
    assert report["steps"] == 2 and report["seeds"] == list(TRAIN_SEEDS)
    for seed in TRAIN_SEEDS:
        manifest = json.loads((out / "worlds" / f"seed-{seed}" / "manifest.json").read_text())
        assert manifest["model"] == f"hf:{model}" and manifest["options"]["seed"] == seed
    meta = json.loads((out / "deeprag.json").read_text())
    assert meta["complete"] and meta["stage"] == "world-reader" and meta["avoided_world"] == {"seed": TINY.seed}
    assert (out / "model.safetensors").exists() and not (out / "checkpoint").exists()
    assert run_reader(request, console=QUIET, progress=False)["steps"] == 2  # complete: not trained again
