"""`reproduce bestpractice-table1`: the held-out refit on a tiny examples file, the shipped
classifier's share of benchmark questions sent to retrieval, its confusion on a tiny world's test
split, the parts read back on a rerun, and the flags that do not apply."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dynrag.classify import QueryClassifier
from dynrag.io.files import file_sha256
from dynrag.reproduce import bestpractice_table1 as table1
from dynrag.reproduce.catalog import table_names
from dynrag.world.entities import generate
from dynrag.world.knowledge import Knowledge
from dynrag.world.make import make_world
from tests.cli_inprocess import run_in_process
from tests.eval.fixtures import HOTPOT, qa_rows, write_json, write_jsonl
from tests.world.fixtures import TINY

SELF_CONTAINED = [
    ("translate", "Translate 'good morning' into Spanish."), ("translate", "Translate 'thank you' into German."),
    ("arithmetic", "What is 12 times 7?"), ("arithmetic", "Add 45 and 38."),
    ("rewrite", "Rewrite this sentence in the passive voice: the cat chased the mouse."),
    ("rewrite", "Make this friendlier: send me the file now."),
    ("format", "Convert this list to JSON: apples, pears, plums."), ("format", "Turn 3.5 hours into minutes."),
]
NEEDS_RETRIEVAL = [
    ("person", "Who was the first woman to win a Nobel Prize?"), ("person", "Who wrote the novel Middlemarch?"),
    ("place", "What is the capital of Mongolia?"), ("place", "Which river flows through Vienna?"),
    ("date", "When did the Berlin Wall fall?"), ("date", "In which year was the Eiffel Tower completed?"),
    ("fact", "How tall is Mount Kilimanjaro?"), ("fact", "What is the population of Iceland?"),
]


def write_examples(path: Path) -> Path:
    rows = [{"text": t, "needs_retrieval": False, "task": task} for task, t in SELF_CONTAINED]
    rows += [{"text": t, "needs_retrieval": True, "task": task} for task, t in NEEDS_RETRIEVAL]
    return write_jsonl(path, rows)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("world")
    make_world(TINY, out, Knowledge("m", {f.id: "known" for f in generate(TINY).facts if f.real}))
    return out


@pytest.fixture(scope="module")
def embedder():
    """The packaged embedder, loaded once for the module (tests/conftest.py shares it)."""
    from dynrag.retrieval.embedder import Embedder

    return Embedder.load()


@pytest.fixture
def setup(tmp_path, monkeypatch, embedder):
    monkeypatch.setattr(table1, "default_examples_path", lambda: write_examples(tmp_path / "examples.jsonl"))
    data_dir = tmp_path / "data"
    (data_dir / "hotpotqa").mkdir(parents=True)
    write_json(data_dir / "hotpotqa" / "hotpot_dev_distractor_sample.json", HOTPOT)
    nq = write_jsonl(tmp_path / "nq.jsonl", qa_rows(3))
    return data_dir, nq, tmp_path / "out"


def shipped_decisions(questions: list[str]) -> np.ndarray:
    return QueryClassifier.load().probabilities(questions) >= 0.5


def parts(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((out / table1.NAME).glob("*.json"))}


@pytest.mark.slow  # embeds every request with the real sentence embedder
def test_every_part_scored_written_and_read_back_on_a_rerun(setup, world, monkeypatch):
    data_dir, nq, out = setup
    args = ["reproduce", table1.NAME, "--data-dir", data_dir, "--data", f"nq={nq}", "--world", world, "--out", out,
            "--write", out / "table1.md"]
    first = run_in_process(*args)
    assert first.returncode == 0, first.stderr
    text = first.stdout
    assert (out / "table1.md").read_text() == text
    got = parts(out)
    assert set(got) == {"heldout", "questions-hotpotqa-nall", "questions-nq-nall", f"world-{_digest(world)}-nall"}

    held = got["heldout"]
    assert (held["n_examples"], held["n_train"], held["n_test"], held["n_tasks"]) == (16, 12, 4, 8)
    assert held["l2"] in table1.L2_GRID and sum(r["n"] for r in held["per_task"].values()) == 4
    pos, neg = held["needs_retrieval"], held["self_contained"]
    assert pos["tp"] + pos["fn"] == 2 and (neg["tp"], neg["fp"]) == (pos["tn"], pos["fn"])
    assert len(held["wrong"]) == pos["fp"] + pos["fn"]
    cells = " | ".join(f"{pos[k]:.3f}" for k in ("accuracy", "precision", "recall", "f1"))
    assert f"| ours: MiniLM + logistic regression, fitted on 12 | our 4 held-out requests | 4 | {cells} |" in text
    assert "| paper: BERT-base-multilingual-cased | their 15-task set | – | 0.950 | 0.960 | 0.940 | 0.950 |" in text

    for ds, questions in (("hotpotqa", [r["question"] for r in HOTPOT]), ("nq", [r["question"] for r in qa_rows(3)])):
        sent = int(shipped_decisions(questions).sum())
        part = got[f"questions-{ds}-nall"]
        assert (part["n"], part["retrieve"]) == (len(questions), sent)
        assert f"| {ds} | {len(questions)} | {sent} | {sent / len(questions):.3f} |" in text
    for ds in ("2wikimultihopqa", "musique", "popqa"):
        assert f"| {ds} | – | – | – | no data: give --data {ds}=PATH" in text

    records = [json.loads(line) for line in (world / "test.jsonl").read_text().splitlines()]
    judged = [r for r in records if r["world"]["needs_retrieval"] is not None]
    pred = shipped_decisions([r["question"] for r in judged])
    truth = [r["world"]["needs_retrieval"] for r in judged]
    expected = {"tp": sum(p and t for p, t in zip(pred, truth)), "fp": sum(p and not t for p, t in zip(pred, truth)),
                "fn": sum(t and not p for p, t in zip(pred, truth)), "tn": sum(not p and not t for p, t in zip(pred, truth))}
    w = got[f"world-{_digest(world)}-nall"]
    assert {k: w["needs_retrieval"][k] for k in expected} == expected and w["n"] == len(records)
    assert "judges the task type, not what the model knows" in text
    assert "computed" in text and "reused" not in text.split("## Cost")[1]
    assert "Source: Table 1 (query classifier" in text

    # A rerun reads every part back: nothing is embedded again.
    def no_embedding(self, texts):
        raise AssertionError("a finished part was computed again")

    with monkeypatch.context() as patch:
        patch.setattr(table1.Models, "embed", no_embedding)
        again = run_in_process(*args)
    assert again.returncode == 0, again.stderr
    assert again.stdout.split("## Cost")[0] == text.split("## Cost")[0]
    assert "heldout reused" in again.stdout and "computed" not in again.stdout.split("## Cost")[1].split("When")[0]

    # A changed data file is scored again; the rest is reused.
    write_jsonl(nq, qa_rows(5))
    third = run_in_process(*args)
    assert "questions-nq-nall computed" in third.stdout and "questions-hotpotqa-nall reused" in third.stdout
    assert parts(out)["questions-nq-nall"]["n"] == 5


def _digest(world: Path) -> str:
    return file_sha256(world / "test.jsonl")[:12]


def test_limit_takes_the_first_questions_of_each_dataset(setup):
    data_dir, nq, out = setup
    text = table1.table1_command(data_dir=data_dir, data={"nq": nq}, world=None, limit=1, out=out,
                                 console=_quiet(), progress=False)
    got = parts(out)
    assert got["questions-hotpotqa-n1"]["n"] == 1 and got["questions-nq-n1"]["n"] == 1
    assert "(first 1 questions per dataset)" in text and "Not run: give `--world DIR`" in text


def _quiet():
    from rich.console import Console

    return Console(quiet=True)


def test_flags_that_do_not_apply_and_bad_inputs_are_one_line_errors(tmp_path):
    assert table1.NAME in table_names()
    refused = run_in_process("reproduce", table1.NAME, "--reader", "g=x", "--row", "a", "--out", tmp_path)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "drop --reader, --row" in refused.stderr
    for args, message in ((["--limit", "0"], "--limit must be at least 1"),
                          (["--world", tmp_path / "nowhere"], "no such directory"),
                          (["--world", tmp_path], "no world here"),
                          (["--data", f"strategyqa={tmp_path}"], "has datasets hotpotqa, 2wikimultihopqa")):
        bad = run_in_process("reproduce", table1.NAME, *args, "--out", tmp_path / "o")
        assert bad.returncode != 0 and "Traceback" not in bad.stderr and message in bad.stderr, bad.stderr
