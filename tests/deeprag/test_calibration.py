"""Chain of calibration: pair construction, the reference pass, DPO end to end on a tiny model."""

import json

import pytest
import torch

from dynrag.corpus.passage import Passage
from dynrag.deeprag.calibration import CalibrationJobOptions, _reference_scores, preference_share, run_calibration
from dynrag.deeprag.pairs import build_pairs, heldout_question, tokenize_pair
from dynrag.deeprag.synth import Models, SynthJobOptions
from dynrag.training.trainer import TrainOptions
from dynrag.deeprag.trajectory import Trajectory
from dynrag.datasets.loaders import load_examples
from dynrag.eval.pool import pool_contexts
from dynrag.io.jsonl import read_jsonl
from dynrag.lm import load_lm
from dynrag.methods.deeprag.narrative import ANSWER, RETRIEVE, Narrative, NarrativeStep
from dynrag.retrieval.bm25 import BM25Index
from rich.console import Console
from tests.deeprag.conftest import narrative_tokenizer, write_wiki
from tests.deeprag.test_synth import knowing_model

torch.set_num_threads(1)

PATH = Trajectory(
    "q7", "Where was the founder of Harbour Mill born?",
    (
        NarrativeStep("Who founded Harbour Mill?", False, "Ada Byrne"),
        NarrativeStep("Where was Ada Byrne born?", True, "Tessaly", (Passage("p1", "Ada Byrne", "Ada Byrne was born in Tessaly."),)),
        NarrativeStep("Is Tessaly a town?", False, "yes"),
    ),
    "Tessaly",
)


def test_one_pair_per_step_with_the_same_history_and_the_optimal_decision_chosen():
    pairs = build_pairs([PATH])
    assert [p.id for p in pairs] == ["q7:1", "q7:2", "q7:3"]
    assert [(p.chosen, p.rejected) for p in pairs] == [(ANSWER, RETRIEVE), (RETRIEVE, ANSWER), (ANSWER, RETRIEVE)]
    assert [p.chosen_decision for p in pairs] == ["parametric", "retrieve", "parametric"]
    narrative = Narrative(shots=0)
    for i, pair in enumerate(pairs):
        history = narrative.prompt(PATH.question, PATH.steps[:i]).text
        assert pair.prompt == history + f"Sub-question: {PATH.steps[i].subquery}\n"  # the history, then the sub-question
    assert "[1] Ada Byrne: Ada Byrne was born in Tessaly.\nSub-question: Where was Ada Byrne born?\nAnswer: Tessaly\n" in pairs[2].prompt
    assert "Tessaly" not in pairs[1].prompt  # nothing of the step decided on leaks into its own pair
    assert {p.split for p in pairs} == {"train"}


def test_held_out_questions_are_fixed_by_id_and_keep_all_their_pairs():
    ids = [f"q{i}" for i in range(400)]
    held = [q for q in ids if heldout_question(q, 0.25)]
    assert 60 < len(held) < 140 and held == [q for q in ids if heldout_question(q, 0.25)]
    assert not any(heldout_question(q, 0.0) for q in ids)
    pairs = build_pairs([Trajectory(held[0], PATH.question, PATH.steps, "x")], heldout=0.25)
    assert {p.split for p in pairs} == {"heldout"}


def test_pair_tokens_continue_the_prompt():
    tok = narrative_tokenizer()
    prompt, chosen, rejected = tokenize_pair(tok, build_pairs([PATH])[1])
    assert tok.convert_ids_to_tokens(chosen) == ["▁Search", "▁results:"] and tok.convert_ids_to_tokens(rejected) == ["▁Answer:"]
    assert prompt == tok(build_pairs([PATH])[1].prompt).input_ids
    assert preference_share([-1.0, -2.0, -3.0], [-2.0, -1.0, -4.0]) == pytest.approx(2 / 3, abs=1e-4)


def knowing_search(tmp_path, tiny_model_dir, questions: int) -> tuple[SynthJobOptions, Models]:
    """A synthesis request over ``questions`` written 2Wiki records and a BM25 index of their
    contexts, and a scripted searcher that knows every other question's founder (so it retrieves
    only the founders it does not know)."""
    data = write_wiki(tmp_path / "train2.json", questions)
    examples = list(load_examples("2wikimultihopqa", data))
    BM25Index.build(pool_contexts(examples), tmp_path / "index", progress=False)
    index = BM25Index.load(tmp_path / "index", backend="numpy")
    founders = {r.decomposition[0].split(" >> ")[0]: r.contexts[0].text.split("founded by ")[1].split(" in ")[0]
                for r in examples[::2]}
    synth = SynthJobOptions(dataset="2wikimultihopqa", data=data, out=tmp_path / "ignored", model=f"hf:{tiny_model_dir}",
                         teacher="dataset", corpus=str(tmp_path / "index"))
    return synth, Models(knowing_model(founders), None, index)


@pytest.mark.slow  # over a second of CPU: `make test` runs it, `make test-fast` does not
def test_calibration_end_to_end_prefers_the_chosen_decisions_more_after_training(tmp_path, tiny_model_dir):
    synth, search = knowing_search(tmp_path, tiny_model_dir, 8)
    out = tmp_path / "coc"
    # the default cosine schedule averages about half the peak rate: twice the constant rate this test had
    options = TrainOptions(lr=6e-3, epochs=6, batch_size=4, threads=1)
    report = run_calibration(CalibrationJobOptions(synth=synth, out=out, beta=0.4, heldout=0.0, options=options), progress=False,
                             search_models=search)
    pairs = read_jsonl(out / "pairs.jsonl")
    assert len(pairs) == 16 and sum(p["chosen_decision"] == "parametric" for p in pairs) == 4
    assert [r["id"] for r in read_jsonl(out / "reference.jsonl")] == [p["id"] for p in pairs]
    before, after = report["prefers_chosen_before"]["train"], report["prefers_chosen_after"]["train"]
    assert after > before and after >= 0.75
    assert report["prefers_chosen_after"]["heldout"] is None
    log = [json.loads(l) for l in (out / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 25))
    assert log[0]["loss"] == pytest.approx(0.6931, abs=1e-3)  # policy == reference at the start: log 2
    meta = json.loads((out / "deeprag.json").read_text())
    assert meta["stage"] == "calibration" and meta["beta"] == 0.4 and meta["prompt"] == {"shots": 0, "style": "plain"}
    assert load_lm(f"hf:{out}", progress=False) is not None


def test_reference_scores_are_computed_once(tmp_path):
    from tests.tiny_models import tiny_llama

    tok = narrative_tokenizer()
    model = tiny_llama(len(tok), seed=6)
    pairs = build_pairs([PATH])
    tokenized = [tokenize_pair(tok, p) for p in pairs]
    calls = []
    model.base_model.register_forward_hook(lambda *a: calls.append(1))
    first = _reference_scores(model, pairs, tokenized, tmp_path, Console(stderr=True), False)
    n = len(calls)
    assert n >= 3
    again = _reference_scores(model, pairs, tokenized, tmp_path, Console(stderr=True), False)
    assert again == first and len(calls) == n and len(read_jsonl(tmp_path / "reference.jsonl")) == 3


def test_a_copied_search_trains_again_without_searching_or_scoring_again(tmp_path, tiny_model_dir):
    """docs/deeprag.md: another schedule on the same pairs by copying OUT/synth and OUT/reference.jsonl."""
    import shutil

    synth, search = knowing_search(tmp_path, tiny_model_dir, 4)
    first, second = tmp_path / "cosine", tmp_path / "constant"
    run_calibration(CalibrationJobOptions(synth=synth, out=first, heldout=0.0, options=TrainOptions(max_steps=1, threads=1)),
                    progress=False, search_models=search)
    second.mkdir()
    shutil.copytree(first / "synth", second / "synth")
    shutil.copy(first / "reference.jsonl", second / "reference.jsonl")
    reference = (second / "reference.jsonl").read_text()
    nothing = Models(None, None, search.retriever)  # any generation would fail on a missing model
    report = run_calibration(
        CalibrationJobOptions(synth=synth, out=second, heldout=0.0, options=TrainOptions(schedule="constant", max_steps=1, threads=1)),
        progress=False, search_models=nothing)
    assert (second / "pairs.jsonl").read_text() == (first / "pairs.jsonl").read_text()
    assert (second / "reference.jsonl").read_text() == reference  # no pair scored again
    assert report["lr_schedule"]["schedule"] == "constant" and report["synth"]["questions"] == 4
