"""A LoRA training run leaves its adapter beside the merged weights, and a run trained over such a
checkpoint leaves both adapters stacked over the first base: each loads to the merged model."""

from __future__ import annotations

import json

import pytest
import torch

from dynrag.deeprag.imitation import ImitationJobOptions, run_imitation
from dynrag.lm import load_lm
from dynrag.lm.adapter import ADAPTER_META, read_adapter
from dynrag.lm.lineage import base_model, checkpoint_meta
from dynrag.training.trainer import TrainOptions
from tests.deeprag.trajectories import write_trajectories

torch.set_num_threads(1)


def logits(spec: str, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return load_lm(spec, progress=False).model(input_ids=ids).logits


@pytest.mark.slow
def test_lora_runs_write_adapters_that_load_to_their_merged_checkpoints(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("DYNRAG_CACHE_DIR", str(tmp_path / "cache"))
    data = write_trajectories(tmp_path / "t.jsonl", 6)
    options = TrainOptions(method="lora", lora_rank=4, lr=3e-2, epochs=1, batch_size=3, threads=1)
    first, second = tmp_path / "imi", tmp_path / "again"
    run_imitation(ImitationJobOptions(data=[data], out=first, model=f"hf:{tiny_model_dir}", options=options), progress=False)
    run_imitation(ImitationJobOptions(data=[data], out=second, model=f"hf:{first}", options=options), progress=False)

    one, two = read_adapter(first / "adapter"), read_adapter(second / "adapter")
    assert one.base == two.base == f"hf:{tiny_model_dir.resolve()}"  # the second is over the first base too
    assert (one.rank, two.rank) == (4, 8)  # stacked: 4 + 4
    assert json.loads((second / "adapter" / ADAPTER_META).read_text())["stages"] == ["imitation", "imitation"]
    ids = torch.tensor([[1, 5, 9, 13, 17, 21]])
    for run in (first, second):
        assert not torch.allclose(logits(f"hf:{run}", ids), logits(f"hf:{tiny_model_dir}", ids), atol=1e-4)  # it trained
        assert torch.allclose(logits(f"hf:{run / 'adapter'}", ids), logits(f"hf:{run}", ids), atol=1e-4)
    # The adapter is prompted and traced back as its merged checkpoint is.
    assert checkpoint_meta(f"hf:{second / 'adapter'}")["prompt"] == {"shots": 0, "style": "plain"}
    assert base_model(f"hf:{second / 'adapter'}") == base_model(f"hf:{second}") == f"hf:{tiny_model_dir.resolve()}"
