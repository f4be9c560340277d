"""benchmarks/gpu_check.py on the tiny random model in bfloat16 on the CPU: the same code path a GPU runs."""

import importlib.util
from pathlib import Path

from tests.tiny_models import tiny_llama, tiny_tokenizer

PROMPT = "the river town bridge built by the engineer in 1887 . the river town bridge built by"
SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"


def test_gpu_check_runs_in_bfloat16_on_the_cpu(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    tok = tiny_tokenizer()
    tiny_llama(len(tok)).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    result = gpu_check.main(["--model", f"hf:{tmp_path}", "--device", "cpu", "--dtype", "bfloat16", "--tokens", "8",
                             "--float32-reference", "--prompt", PROMPT])
    assert result["device"] == "cpu" and result["dtype"] == "bfloat16" and result["tokens"] == 8
    assert result["lookup_same_tokens"] and result["plain_tokens_per_s"] > 0
    assert result["eager_attention_max_diff"] < 2e-2  # bf16 rounding, not a wrong row
    assert result["float32_attention_max_diff"] < 5e-2
    # Batched in bf16: each row decodes as it would alone.
    assert result["batch_rows"] == 4 and result["batch_same_tokens"] == 4
    assert result["batch_attention_max_diff"] < 2e-2 and result["batch_tokens_per_s"] > 0
    assert '"plain_tokens_per_s"' in capsys.readouterr().out
