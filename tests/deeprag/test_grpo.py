"""GRPO (stage II by reinforcement learning): reward, advantages, objective, passage mask, and a
two-step run on a tiny random model that is interrupted and resumed."""

import json
import math

import pytest
import torch

from dynrag.corpus.passage import Passage
from dynrag.deeprag import grpo as grpo_module
from dynrag.datasets.formats.registry import dataset_spec
from dynrag.deeprag.grpo import GrpoOptions, GrpoJobOptions, run_grpo
from dynrag.deeprag.grpo_options import settle_limits
from dynrag.training.losses import grpo_token_losses, learned_logprobs
from dynrag.deeprag.rewards import RewardOptions, group_advantages, rollout_reward
from dynrag.deeprag.rollout import narrative_tokens, spans
from dynrag.errors import ConfigError
from dynrag.methods.deeprag.narrative import Narrative, NarrativeStep
from dynrag.retrieval.base import Hit
from tests.cli_inprocess import run_in_process
from tests.deeprag.conftest import narrative_tokenizer, write_wiki
from tests.fakes import FakeRetriever
from tests.tiny_models import tiny_llama

torch.set_num_threads(1)


def test_reward_is_correctness_first_then_fewer_retrievals():
    em = RewardOptions()
    assert rollout_reward(1.0, 1.0, 0, True, em) == pytest.approx(1.0)
    assert rollout_reward(1.0, 1.0, 3, True, em) == pytest.approx(0.7)  # 1 - 0.1 * 3
    assert rollout_reward(1.0, 1.0, 9, False, em) == pytest.approx(0.5)  # cost capped at 5 retrievals
    assert rollout_reward(0.0, 0.4, 1, True, em) == pytest.approx(0.1)  # wrong, but it wrote its final line
    assert rollout_reward(0.0, 0.4, 1, False, em) == 0.0  # wrong, and the final answer had to be asked for
    f1 = RewardOptions(match="f1", retrieval_cost=0.2, cost_cap=2, format_reward=0.05)
    assert rollout_reward(0.0, 0.5, 1, False, f1) == pytest.approx(0.4)  # 0.5 * (1 - 0.2)
    assert rollout_reward(0.0, 0.5, 4, False, f1) == pytest.approx(0.3)  # 0.5 * (1 - 0.2 * 2)
    assert rollout_reward(0.0, 0.04, 0, True, f1) == pytest.approx(0.05)  # the format reward is a floor


def test_group_advantages_are_normalised_within_the_group():
    # mean 0.5, population std sqrt(0.125) = 0.353553
    adv = group_advantages([1.0, 0.0, 0.5, 0.5])
    assert adv == pytest.approx([0.5 / (math.sqrt(0.125) + 1e-4), -0.5 / (math.sqrt(0.125) + 1e-4), 0.0, 0.0])
    assert group_advantages([0.7, 0.7, 0.7]) == [0.0, 0.0, 0.0]  # nothing to learn from a tied group
    assert group_advantages([]) == []


def test_grpo_token_loss_clips_the_ratio_and_penalises_kl():
    logp = torch.tensor([math.log(0.3), math.log(0.3)])
    # ratio 1, reference equal: the loss is -A, the KL 0
    loss, kl = grpo_token_losses(logp, logp, logp, 2.0, 0.2, 0.5)
    assert loss.tolist() == pytest.approx([-2.0, -2.0]) and kl.tolist() == pytest.approx([0.0, 0.0])
    old = logp - math.log(1.5)  # ratio 1.5
    assert grpo_token_losses(logp, old, logp, 1.0, 0.2, 0.0)[0].tolist() == pytest.approx([-1.2, -1.2])  # clipped at 1.2
    assert grpo_token_losses(logp, old, logp, -1.0, 0.2, 0.0)[0].tolist() == pytest.approx([1.5, 1.5])  # min keeps -1.5
    ref = logp + math.log(2.0)  # ref / pi = 2: KL = 2 - log 2 - 1
    loss, kl = grpo_token_losses(logp, logp, ref, 0.0, 0.2, 0.5)
    assert kl.tolist() == pytest.approx([1 - math.log(2)] * 2) and loss.tolist() == pytest.approx([0.5 * (1 - math.log(2))] * 2)


def test_one_step_raises_the_rollout_with_positive_advantage_and_lowers_the_other():
    tok = narrative_tokenizer()
    model = tiny_llama(len(tok), seed=3).train()
    narrative = Narrative(shots=0)
    good = narrative_tokens(tok, narrative, "Where was Ada Byrne born?", (), "Tessaly")
    bad = narrative_tokens(tok, narrative, "Where was Ada Byrne born?", (), "Corrow")

    def logps():
        out = []
        for ids, learned, _ in (good, bad):
            labels = [-100] * len(ids)
            for a, b in learned:
                labels[a:b] = ids[a:b]
            out.append((ids, labels))
        return out

    with torch.no_grad():
        before = [float(learned_logprobs(model, ids, labels).sum()) for ids, labels in logps()]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for (ids, labels), advantage in zip(logps(), [1.0, -1.0]):
        lp = learned_logprobs(model, ids, labels)
        grpo_token_losses(lp, lp.detach(), lp.detach(), advantage, 0.2, 0.04)[0].mean().backward()
    optimizer.step()
    with torch.no_grad():
        after = [float(learned_logprobs(model, ids, labels).sum()) for ids, labels in logps()]
    assert after[0] > before[0] and after[1] < before[1]


def test_retrieved_passages_are_never_learned():
    tok = narrative_tokenizer()
    steps = (NarrativeStep("Who founded Harbour Mill?", False, "Ada Byrne"),
             NarrativeStep("Where was Ada Byrne born?", True, "Tessaly", (Passage("p1", "Ada Byrne", "Ada Byrne was born in Tessaly."),)))
    ids, learned, passages = narrative_tokens(tok, Narrative(shots=0), "Where was the founder of Harbour Mill born?", steps, "Tessaly")
    assert len(passages) == 1
    start, end = passages[0]
    passage = tok.decode(ids[start:end]).strip()
    assert passage.startswith("[1] Ada") and passage.endswith("Ada Byrne was born in Tessaly.")
    learned_positions = {i for a, b in learned for i in range(a, b)}
    assert not learned_positions & set(range(start, end))
    learned_text = " ".join(tok.decode(ids[a:b]) for a, b in learned)
    assert "Search results:" in learned_text and "Tessaly." in learned_text and ids[-1] == tok.eos_token_id
    assert "Where was the founder" not in learned_text  # the question is given, not learned
    assert spans([False, True, True, False, True]) == ((1, 3), (4, 5))


def request(tmp_path, tiny_model_dir, **options):
    data = write_wiki(tmp_path / "train.json", 4)
    opts = GrpoOptions(method="full", lr=1e-3, batch_size=2, group=2, max_new_tokens=12, max_subqueries=2, threads=1, shots=0,
                       save_every=1, **options)
    return GrpoJobOptions(dataset="2wikimultihopqa", data=data, out=tmp_path / "grpo", model=f"hf:{tiny_model_dir}", options=opts)


@pytest.mark.slow  # over a second of CPU: `make test` runs it, `make test-fast` does not
def test_two_step_run_interrupted_then_resumed_writes_each_step_and_rollout_once(tmp_path, tiny_model_dir, monkeypatch):
    retriever = FakeRetriever([Hit("p1", "Ada Byrne", "Ada Byrne was born in Tessaly.", 1.0)])
    req = request(tmp_path, tiny_model_dir)
    real, calls = grpo_module.grpo_token_losses, []

    def failing(*args, **kwargs):  # the second step dies after its rollouts are on disk
        calls.append(1)
        if len(calls) > 4:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(grpo_module, "grpo_token_losses", failing)
    with pytest.raises(KeyboardInterrupt):
        run_grpo(req, progress=False, retriever=retriever)
    out = req.out
    assert [json.loads(l)["step"] for l in (out / "train_log.jsonl").read_text().splitlines()] == [1]
    assert len((out / "rollouts.jsonl").read_text().splitlines()) == 4  # both steps' groups were sampled
    monkeypatch.setattr(grpo_module, "grpo_token_losses", real)
    report = run_grpo(req, progress=False, retriever=retriever)

    log = [json.loads(l) for l in (out / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2] and report["steps"] == 2 and report["stage"] == "grpo"
    assert log[1]["groups_sampled"] == 0  # step 2's rollouts were read back, not sampled again
    for key in ("reward", "em", "f1", "retrievals", "kl", "loss"):
        assert key in log[0]
    rollouts = [json.loads(l) for l in (out / "rollouts.jsonl").read_text().splitlines()]
    assert len(rollouts) == 4 and len({(r["step"], r["id"]) for r in rollouts}) == 4
    first = rollouts[0]["rollouts"][0]
    assert {"input_ids", "learned", "passages", "final_answer", "em", "f1", "retrievals", "reward"} <= first.keys()
    assert (out / "grpo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "model.safetensors").exists() and (out / "config.json").exists() and not (out / "checkpoint").exists()
    assert json.loads((out / "grpo_run.json").read_text())["options"]["group"] == 2
    assert json.loads((out / "deeprag.json").read_text())["prompt"] == {"shots": 0, "style": "plain"}


def test_rollouts_are_reproducible_from_the_seed(tmp_path, tiny_model_dir):
    from dynrag.training.models import load_trainable
    from dynrag.deeprag.rollout import sample_group
    from dynrag.datasets.loaders import load_examples

    req = request(tmp_path, tiny_model_dir)
    example = next(iter(load_examples("2wikimultihopqa", req.data)))
    model, tok, _ = load_trainable(req.model, progress=False)
    options = settle_limits(req.options, dataset_spec("2wikimultihopqa"))
    policy = grpo_module.Policy(req.model, model, tok, None, FakeRetriever([]), options, False)
    draw = lambda step: [r.input_ids for r in sample_group(policy.method, policy.lm, tok, example, step, 2, policy.sampling,
                                                              policy.rewards)]
    first = draw(0)
    assert draw(0) == first and draw(1) != first and first[0] != first[1]


def test_bad_options_fail_in_one_line(tmp_path, tiny_model_dir):
    data = write_wiki(tmp_path / "train.json", 2)
    common = ["train", "grpo", "--model", f"hf:{tiny_model_dir}", "--dataset", "2wikimultihopqa", "--data", str(data),
              "--out", str(tmp_path / "o")]
    for extra, needle in ((["--group", "1"], "group"), (["--option", "bogus=1"], "bogus"), (["--match", "bleu"], "match")):
        result = run_in_process(*common, *extra)
        assert result.returncode != 0 and needle in result.stderr and "Traceback" not in result.stderr
    with pytest.raises(ConfigError):
        run_grpo(GrpoJobOptions(dataset="2wikimultihopqa", data=data, out=tmp_path / "o", model=f"hf:{tiny_model_dir}", limit=0))


def test_lora_reference_is_the_base_model_with_adapters_off():
    from dynrag.training.lora import add_lora, lora_disabled

    tok = narrative_tokenizer()
    model = tiny_llama(len(tok), seed=2)
    ids = torch.tensor([[5, 9, 14, 22]])
    base = model(input_ids=ids).logits.detach()
    params = add_lora(model, rank=2, alpha=4.0)
    with torch.no_grad():
        for p in params.values():
            p.add_(0.05)  # adapters that change the output
        changed = model(input_ids=ids).logits
        with lora_disabled(model):
            reference = model(input_ids=ids).logits
        assert not torch.allclose(changed, base, atol=1e-4) and torch.allclose(reference, base, atol=1e-6)
        assert torch.allclose(model(input_ids=ids).logits, changed)  # switched back on after


class SampledScript:
    """A scripted model with the sampling switch rollouts use: one sub-question, retrieved, answered."""

    def __init__(self):
        from tests.fakes import ScriptedLM

        self.seeds = []
        self.inner = ScriptedLM(self.reply)
        self.name = "scripted"

    @staticmethod
    def reply(text):
        from dynrag.methods.deeprag.narrative import ANSWER, RETRIEVE, SUBQUERY

        last = text.rstrip("\n").split("\n")[-1]
        if text.endswith(ANSWER):
            return " Tessaly"
        if last.startswith(SUBQUERY):
            return RETRIEVE
        if last.startswith(ANSWER):
            return "So the answer is Tessaly."
        return f"{SUBQUERY} Where was Ada Byrne born?"

    def sampled(self, sampling):
        from contextlib import nullcontext

        self.seeds.append(sampling.seed)
        return nullcontext()

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_rollout_retrieves_inside_the_method_and_is_rewarded_for_it():
    from dynrag.deeprag.rollout import sample_group
    from dynrag.datasets.examples import QAExample
    from dynrag.lm.row_decode import Sampling
    from dynrag.methods.deeprag.method import DeepRag, DeepRagOptions

    lm, retriever = SampledScript(), FakeRetriever([Hit("p1", "Ada Byrne", "Ada Byrne was born in Tessaly.", 1.0)])
    method = DeepRag(lm, None, DeepRagOptions(shots=0), retriever)
    example = QAExample("q1", "Where was Ada Byrne born?", ["Tessaly"])
    rollouts = sample_group(method, lm, narrative_tokenizer(), example, 3, 2, Sampling(1.0, 1.0, 0), RewardOptions())
    assert retriever.queries == ["Where was Ada Byrne born?"] * 2 and len(set(lm.seeds)) == 2
    for r in rollouts:
        assert (r.retrievals, r.em, r.wrote_final, r.reward) == (1, 1.0, True, pytest.approx(0.9))
        assert r.steps[0].passages[0].text == "Ada Byrne was born in Tessaly." and len(r.passages) == 1
        assert not {i for a, b in r.learned for i in range(a, b)} & set(range(*r.passages[0]))


@pytest.mark.slow
def test_grpo_killed_with_sigkill_resumes_without_sampling_or_logging_twice(tmp_path, tiny_model_dir):
    from tests.deeprag.killing import kill_when, run_dynrag

    data = write_wiki(tmp_path / "train.json", 24)
    out = tmp_path / "grpo"
    args = ["train", "grpo", "--model", f"hf:{tiny_model_dir}", "--dataset", "2wikimultihopqa", "--data", str(data),
            "--out", str(out), "--questions-per-step", "2", "-G", "2", "--lr", "1e-3", "--save-every", "2", "--threads", "1",
            "--option", "shots=0", "--option", "max_new_tokens=24", "--no-progress"]

    def checkpointed():
        try:
            return json.loads((out / "checkpoint" / "state.json").read_text())["step"] >= 4
        except (OSError, ValueError):
            return False

    kill_when(args, checkpointed)
    done = run_dynrag(args)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [json.loads(l)["step"] for l in (out / "train_log.jsonl").read_text().splitlines()] == list(range(1, 13))
    keys = [(r["step"], r["id"]) for r in map(json.loads, (out / "rollouts.jsonl").read_text().splitlines())]
    assert len(keys) == len(set(keys)) == 24  # every question's group sampled once, none twice


def test_an_out_with_rollouts_of_other_settings_is_refused(tmp_path):
    from dynrag.deeprag.grpo import claim_run

    identity = {"questions": "abc", "model": "hf:m", "options": {"group": 4, "beta": 0.04}}
    claim_run(tmp_path, identity)
    claim_run(tmp_path, json.loads(json.dumps(identity)))  # the same run: resumed
    with pytest.raises(ConfigError, match="option group"):
        claim_run(tmp_path, {**identity, "options": {"group": 2, "beta": 0.04}})
    with pytest.raises(ConfigError, match="questions"):
        claim_run(tmp_path, {**identity, "questions": "xyz"})


@pytest.mark.parametrize("recipe", ["authors", "cpu-small"])
def test_train_grpo_runs_end_to_end_from_the_command_line_under_each_recipe(tmp_path, tiny_model_dir, recipe):
    data = write_wiki(tmp_path / "train.json", 2)
    out = tmp_path / recipe
    # the recipe's values, but for what keeps this to one small step on a tiny random model
    result = run_in_process("train", "grpo", "--model", f"hf:{tiny_model_dir}", "--dataset", "2wikimultihopqa",
                            "--data", data, "--out", out, "--recipe", recipe, "--questions-per-step", "2",
                            "--group", "2", "--max-steps", "1", "--threads", "1", "--method", "full",
                            "--option", "max_new_tokens=12", "--option", "shots=0", "--no-progress")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["stage"] == "grpo"
    options = json.loads((out / "grpo_run.json").read_text())["options"]
    expected = {"authors": (0.001, 0.95, 0.001, "token", 10.0, "constant"),
                "cpu-small": (0.04, 1.0, 0.0, "rollout", None, "cosine")}[recipe]
    assert (options["beta"], options["top_p"], options["entropy_coef"], options["loss_average"], options["kl_clamp"],
            options["schedule"]) == expected
    assert (options["max_subqueries"], options["max_retrievals"]) == (10, 10)  # 2Wiki's limits, written in
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1] and math.isfinite(log[0]["loss"]) and "entropy" in log[0]
    assert (out / "model.safetensors").exists()
