"""`dynrag tune` end to end with the real bundled model: a two-point grid of DRAGIN's theta (slow)."""

import pytest
import yaml

from tests.cli_inprocess import run_in_process
from tests.eval import fixtures as fx
from tests.tune.test_tune import study_trials


@pytest.mark.slow
def test_a_grid_of_dragin_theta_with_the_bundled_model(tmp_path):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(2))
    out = tmp_path / "tune"
    r = run_in_process("tune", "--dataset", "jsonl", "--data", data, "--corpus", "contexts", "--method", "dragin",
                       "--model", "bundled:smollm2", "--option", "max_new_tokens=24", "--workers", "1",
                       "--space", "theta=0.05,5.0", "--sampler", "grid", "--trials", "2",
                       "--also", "retrievals_per_question", "--out", out, "--report")
    assert r.returncode == 0, r.stderr
    assert [s for _, s in study_trials(out)] == ["COMPLETE", "COMPLETE"]
    assert "| trial | state | theta | em | retrievals_per_question |" in r.stdout
    best = yaml.safe_load((out / "best.yaml").read_text())
    assert best["model"] == "bundled:smollm2" and best["options"]["theta"] in (0.05, 5.0)
    assert (out / "tune.png").is_file()
