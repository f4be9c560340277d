"""Stage I on a tiny random Llama: output directory, log, LoRA, quantised rebuild, bad input."""

import json

import pytest
import torch

from dynrag.deeprag.imitation import ImitationJobOptions, run_imitation
from dynrag.training.lora import LoRALinear, add_lora, merge_lora
from dynrag.training.models import plain_model
from dynrag.training.trainer import TrainOptions, plan_batches
from dynrag.errors import ConfigError, DataError
from dynrag.lm import load_lm
from dynrag.methods.registry import build_method
from tests.deeprag.trajectories import write_trajectories
from tests.tiny_models import tiny_llama

torch.set_num_threads(1)


@pytest.mark.parametrize("method", ["full", "lora"])
def test_imitation_writes_a_loadable_hf_directory_with_log_and_curve(tmp_path, tiny_model_dir, method):
    data = write_trajectories(tmp_path / "t.jsonl", 12)
    out = tmp_path / "imi"
    options = TrainOptions(method=method, lr=3e-3 if method == "full" else 3e-2, epochs=4, batch_size=3, save_every=5, threads=1)
    report = run_imitation(ImitationJobOptions(data=[data], out=out, model=f"hf:{tiny_model_dir}", options=options), progress=False)
    assert report["steps"] == 16 and report["examples"] == 12
    assert report["final_loss"] < report["first_loss"]  # it learns the repeated narratives
    log = [json.loads(l) for l in (out / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 17))
    assert all(r["tokens"] > r["learned_tokens"] > 0 and r["tokens_per_second"] > 0 for r in log)
    assert (out / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (out / "checkpoint").exists()
    assert (out / "model.safetensors").exists() and not list(out.glob("*.bin"))
    meta = json.loads((out / "deeprag.json").read_text())
    assert meta["complete"] and meta["stage"] == "imitation" and meta["prompt"] == {"shots": 0, "style": "plain"}
    lm = load_lm(f"hf:{out}", progress=False)
    assert not any(isinstance(m, LoRALinear) for m in lm.model.modules())  # adapters merged away
    assert build_method("deeprag", lm, retriever=object(), options={}).narrative.shots == 0
    again = run_imitation(ImitationJobOptions(data=[data], out=out, model=f"hf:{tiny_model_dir}", options=options), progress=False)
    assert again["steps"] == 16 and len((out / "train_log.jsonl").read_text().splitlines()) == 16  # not retrained


def test_lora_starts_at_the_base_model_trains_only_adapters_and_merges_exactly():
    model = tiny_llama(64, seed=2)
    ids = torch.tensor([[1, 5, 9, 13, 17]])
    with torch.no_grad():
        base_logits = model(input_ids=ids).logits
    params = add_lora(model, rank=4, alpha=8)
    assert params and all(".lora_" in n for n in params)
    assert all(not p.requires_grad for n, p in model.named_parameters() if ".lora_" not in n)
    with torch.no_grad():
        assert torch.allclose(model(input_ids=ids).logits, base_logits)  # B starts at zero
        for p in params.values():
            p.add_(0.05 * torch.randn_like(p))
        adapted = model(input_ids=ids).logits
    assert not torch.allclose(adapted, base_logits)
    merge_lora(model)
    assert not any(isinstance(m, LoRALinear) for m in model.modules())
    with torch.no_grad():
        assert torch.allclose(model(input_ids=ids).logits, adapted, atol=1e-5)


def test_a_model_flagged_quantised_is_rebuilt_with_the_same_weights():
    model = tiny_llama(64, seed=3)
    assert plain_model(model) is model
    model.hf_quantizer = object()  # what a GGUF load leaves behind
    rebuilt = plain_model(model)
    assert rebuilt is not model and getattr(rebuilt, "hf_quantizer", None) is None
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        assert torch.allclose(rebuilt(input_ids=ids).logits, model(input_ids=ids).logits)


def test_batches_are_fixed_by_the_seed_and_cover_every_example_once_per_epoch():
    lengths = [5, 50, 7, 30, 12, 8, 40, 9, 11]
    plan = plan_batches(lengths, batch_size=2, epochs=2, seed=1, group=2)
    assert plan == plan_batches(lengths, batch_size=2, epochs=2, seed=1, group=2)
    assert plan != plan_batches(lengths, batch_size=2, epochs=2, seed=2, group=2)
    per_epoch = len(plan) // 2
    for epoch in (plan[:per_epoch], plan[per_epoch:]):
        assert sorted(i for batch in epoch for i in batch) == list(range(9))


def test_bad_trajectory_lines_and_options_are_named(tmp_path, tiny_model_dir):
    data = write_trajectories(tmp_path / "t.jsonl", 3)
    lines = data.read_text().splitlines()
    bad = json.loads(lines[1])
    bad["steps"][0]["retrieve"] = "sometimes"
    data.write_text("\n".join([lines[0], json.dumps(bad), lines[2]]) + "\n")
    with pytest.raises(DataError, match=r"t\.jsonl:2: bad trajectory: steps\[0\]\.'retrieve' must be true or false"):
        run_imitation(ImitationJobOptions(data=[data], out=tmp_path / "o", model=f"hf:{tiny_model_dir}"), progress=False)
    data.write_text(lines[0] + "\n" + lines[1][:40])  # a last line cut short is an error too
    with pytest.raises(DataError, match=r"t\.jsonl:2: "):
        run_imitation(ImitationJobOptions(data=[data], out=tmp_path / "o", model=f"hf:{tiny_model_dir}"), progress=False)
    with pytest.raises(DataError, match="no such trajectory file"):
        run_imitation(ImitationJobOptions(data=[tmp_path / "nowhere"], out=tmp_path / "o", model=f"hf:{tiny_model_dir}"), progress=False)
    from dynrag.deeprag.train_cli import train_options

    with pytest.raises(ConfigError, match="training: unknown option 'lerning_rate'; valid options: .*lr"):
        train_options(["lerning_rate=3"])
    with pytest.raises(ConfigError, match="option 'method'"):
        train_options([], method="half")


def test_method_auto_is_lora_only_above_a_billion_parameters():
    from types import SimpleNamespace

    from dynrag.training.trainer import settle_method

    def sized(n):  # a stand-in model: only its parameter count is read
        return SimpleNamespace(parameters=lambda: iter([SimpleNamespace(numel=lambda: n)]))

    assert settle_method(TrainOptions(), sized(135_000_000), available=None).method == "full"
    assert settle_method(TrainOptions(), sized(7_000_000_000), available=None).method == "lora"
    assert settle_method(TrainOptions(method="full"), sized(7_000_000_000), available=None).method == "full"
