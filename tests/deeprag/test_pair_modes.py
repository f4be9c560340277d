"""Calibration pair modes (--pairs optimal|response|all-nodes|sentence-order) on hand-made
trajectories, masked completion log-probabilities, and the modes through run_calibration and the CLI."""

import shutil

import pytest
import torch
from typer.testing import CliRunner

from dynrag.cli import app
from dynrag.corpus.passage import Passage
from dynrag.deeprag.calibration import CalibrationJobOptions, run_calibration
from dynrag.training.losses import completion_logprobs
from dynrag.deeprag.pairs import build_pairs, node_costs, pair_masks, tokenize_pair
from dynrag.training.trainer import TrainOptions
from dynrag.deeprag.trajectory import Trajectory
from dynrag.errors import ConfigError
from dynrag.io.jsonl import read_jsonl
from dynrag.methods.deeprag.narrative import ANSWER, RETRIEVE, Narrative, NarrativeStep
from tests.deeprag.conftest import narrative_tokenizer
from tests.deeprag.test_calibration import knowing_search

torch.set_num_threads(1)

MILL = Passage("p0", "Harbour Mill", "Harbour Mill was founded by Ada Byrne.")
BORN = Passage("p1", "Ada Byrne", "Ada Byrne was born in Tessaly.")
Q1, Q2 = "Who founded Harbour Mill?", "Where was Ada Byrne born?"
P1, R1 = NarrativeStep(Q1, False, "Ada Byrne"), NarrativeStep(Q1, True, "Ada Byrne", (MILL,))
P2, R2 = NarrativeStep(Q2, False, "Tessaly"), NarrativeStep(Q2, True, "Tessaly", (BORN,))
QUESTION = "Where was the founder of Harbour Mill born?"
# Correct narratives in the order found: PR (1 retrieval), RP (1), RR (2); PP was wrong.
CORRECT = (((P1, R2), "Tessaly"), ((R1, P2), "Tessaly"), ((R1, R2), "Tessaly"))
T = Trajectory("q7", QUESTION, (P1, R2), "Tessaly", others=(R1, NarrativeStep(Q2, False, "Nowhere")), correct=CORRECT)


def given_texts(text, spans):
    return [text[a:b] for a, b in spans]


def test_optimal_pairs_are_markers_at_the_steps_of_the_selected_narrative():
    pairs = build_pairs([T])  # the default mode, unchanged
    assert [(p.id, p.chosen, p.rejected, p.mode) for p in pairs] == [
        ("q7:1", ANSWER, RETRIEVE, "optimal"), ("q7:2", RETRIEVE, ANSWER, "optimal")]
    assert all(not p.chosen_given and not p.rejected_given for p in pairs)


def test_response_pairs_set_whole_responses_against_each_other_with_the_passages_given():
    pairs = build_pairs([T], mode="response")
    optimal = build_pairs([T])
    assert [p.prompt for p in pairs] == [p.prompt for p in optimal]  # the same states
    first, second = pairs
    assert first.chosen == "Answer: Ada Byrne\n" and first.chosen_given == ()
    assert first.rejected == ("Search results:\n[1] Harbour Mill: Harbour Mill was founded by Ada Byrne.\n"
                              f"Sub-question: {Q1}\nAnswer: Ada Byrne\n")
    assert given_texts(first.rejected, first.rejected_given) == [
        "[1] Harbour Mill: Harbour Mill was founded by Ada Byrne.\n", f"Sub-question: {Q1}\n"]
    assert second.chosen.startswith(RETRIEVE) and second.rejected == "Answer: Nowhere\n"
    assert (first.chosen_decision, second.chosen_decision) == ("parametric", "retrieve")
    with pytest.raises(ValueError, match="keep=siblings"):
        build_pairs([Trajectory("q8", QUESTION, (P1, R2), "Tessaly")], mode="response")


def test_all_nodes_ranks_each_node_by_its_cheapest_correct_narrative_and_skips_ties():
    costs = node_costs(CORRECT)
    # root: P -> PR (1), R -> RP (1) or RR (2): a tie, no pair
    assert costs[((), Q1)] == {False: 1, True: 1}
    assert costs[((P1,), Q2)] == {True: 1}  # after P only retrieving is ever right
    assert costs[((R1,), Q2)] == {False: 1, True: 2}
    pairs = build_pairs([T], mode="all-nodes")
    assert [(p.id, p.step, p.chosen, p.chosen_decision) for p in pairs] == [
        ("q7:n1", 2, RETRIEVE, "retrieve"), ("q7:n2", 2, ANSWER, "parametric")]
    narrative = Narrative(shots=0)
    assert pairs[1].prompt == narrative.prompt(QUESTION, (R1,)).text + f"Sub-question: {Q2}\n"  # off the optimal path
    with pytest.raises(ValueError, match="keep=all-correct"):
        build_pairs([Trajectory("q8", QUESTION, (P1, R2), "Tessaly")], mode="all-nodes")


def test_sentence_order_pairs_whole_narratives_with_fewer_retrievals_chosen():
    pairs = build_pairs([T], mode="sentence-order")
    # costs 1, 1, 2: PR > RR and RP > RR; PR and RP are equal, so no pair
    assert [p.id for p in pairs] == ["q7:s1", "q7:s2"]
    assert pairs[0].prompt == Narrative(shots=0).prompt(QUESTION).text
    assert pairs[0].chosen.startswith(f"Sub-question: {Q1}\nAnswer: Ada Byrne\n")
    assert pairs[0].chosen.endswith("So the answer is Tessaly.\n")
    assert pairs[0].rejected.count(RETRIEVE) == 2 and pairs[1].chosen.startswith(f"Sub-question: {Q1}\n{RETRIEVE}")
    assert given_texts(pairs[0].chosen, pairs[0].chosen_given) == [
        "[1] Ada Byrne: Ada Byrne was born in Tessaly.\n", f"Sub-question: {Q2}\n"]
    assert {p.chosen_decision for p in pairs} == {"fewer_retrievals"}


def test_bad_mode_names_the_choices():
    with pytest.raises(ConfigError, match="--pairs 'nodes': choose one of optimal, all-nodes, sentence-order, response"):
        build_pairs([T], mode="nodes")


def test_given_tokens_carry_no_log_probability():
    from tests.tiny_models import tiny_llama

    tok = narrative_tokenizer([MILL.text, BORN.text, QUESTION, "Nowhere"])
    pair = build_pairs([T], mode="response")[0]
    prompt, chosen, rejected = tokenize_pair(tok, pair)
    masks = pair_masks(tok, pair)
    assert masks[0] == [True] * len(chosen)
    kept = [t for t, keep in zip(tok.convert_ids_to_tokens(rejected), masks[1]) if keep]
    assert " ".join(kept).replace("▁", "") == "Search results: \n Answer: Ada Byrne \n"
    assert pair_masks(tok, build_pairs([T])[0]) is None  # marker pairs: every token counts
    model = tiny_llama(len(tok), seed=3)
    with torch.no_grad():
        plain = completion_logprobs(model, prompt, [chosen, rejected])
        masked = completion_logprobs(model, prompt, [chosen, rejected], masks)
        only_first = completion_logprobs(model, prompt, [rejected[:1]])
        none_after = completion_logprobs(model, prompt, [rejected], [[True] + [False] * (len(rejected) - 1)])
    assert masked[0] == pytest.approx(plain[0].item(), abs=1e-5)
    assert masked[1] > plain[1]  # the passages' log-probabilities are left out
    assert none_after[0] == pytest.approx(only_first[0].item(), abs=1e-5)


@pytest.fixture
def search_setup(tmp_path, tiny_model_dir):
    return knowing_search(tmp_path, tiny_model_dir, 4)


@pytest.mark.parametrize("mode", ["response", "all-nodes"])
def test_calibration_trains_one_step_on_each_mode_and_a_resume_must_keep_it(tmp_path, search_setup, mode):
    synth, models = search_setup
    out = tmp_path / mode
    options = TrainOptions(lr=1e-3, max_steps=1, batch_size=2, threads=1)
    report = run_calibration(CalibrationJobOptions(synth=synth, out=out, heldout=0.0, options=options, pairs=mode),
                             progress=False, search_models=models)
    pairs = read_jsonl(out / "pairs.jsonl")
    assert report["pairs"]["mode"] == mode and {p["mode"] for p in pairs} == {mode}
    if mode == "response":  # 4 questions x 2 steps; passages given on every retrieving side
        assert len(pairs) == 8 and all(p["chosen_given"] or p["rejected_given"] for p in pairs)
    else:  # known founder: the root (PR 1 < RR 2), after P and after R (only R is right): 3 pairs;
        # unknown founder: only RR is right, so R at the root and after R: 2 pairs
        assert len(pairs) == 3 * 2 + 2 * 2 and all(p["id"].split(":")[1].startswith("n") for p in pairs)
    assert [r["id"] for r in read_jsonl(out / "reference.jsonl")] == [p["id"] for p in pairs]
    half = tmp_path / "half"  # an OUT whose search is done and whose training is not, resumed with another mode
    shutil.copytree(out / "synth", half / "synth")
    with pytest.raises(ConfigError, match=f"started with --pairs {mode}.*, not --pairs optimal"):
        run_calibration(CalibrationJobOptions(synth=synth, out=half, heldout=0.0, options=options), progress=False,
                        search_models=models)


def test_the_cli_names_the_pair_modes_and_selections(tmp_path):
    cli = CliRunner()
    r = cli.invoke(app, ["train", "calibration", "--model", "bundled", "--dataset", "hotpotqa", "--data",
                         str(tmp_path / "x.json"), "--out", str(tmp_path / "o"), "--pairs", "everything"])
    assert r.exit_code == 1 and "--pairs 'everything': choose one of optimal, all-nodes" in r.output.replace("\n", "")
    r = cli.invoke(app, ["synth", "--dataset", "hotpotqa", "--data", str(tmp_path / "x.json"), "--out",
                         str(tmp_path / "s"), "--select", "most"])
    assert r.exit_code == 1 and "--select 'most': choose one of min, max, random" in r.output.replace("\n", "")
