"""The five DeepRAG commands (ask, synth, train imitation, train calibration, eval), end to end
on the bundled model, on a tiny benchmark written for this test (invented places and people),
with tiny limits (integration, slow)."""

import json

import pytest

from tests.deeprag.conftest import wiki_record
from tests.deeprag.killing import run_dynrag

pytestmark = pytest.mark.slow


def write(path, records):
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def ok(result):
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def test_ask_synth_imitation_calibration_eval(tmp_path):
    # Three questions a stage and two held out: each command's work stays a few model calls.
    records = [wiki_record(i) for i in range(8)]
    stage_one = write(tmp_path / "train1.json", records[:3])
    stage_two = write(tmp_path / "train2.json", records[3:6])
    held_out = write(tmp_path / "dev.json", records[6:8])
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"{r['_id']}-{j}", "title": t, "text": " ".join(s)}) + "\n"
                              for r in records for j, (t, s) in enumerate(r["context"])))
    ok(run_dynrag(["index", str(corpus), "--out", str(tmp_path / "index")]))

    # 1. untrained: the project's worked examples
    asked = ok(run_dynrag(["ask", records[0]["question"], "--corpus", str(tmp_path / "index"), "--method", "deeprag",
                           "--model", "bundled:smollm2", "--json"]))
    trace = json.loads(asked.stdout)
    assert trace["method"] == "deeprag" and trace["final_answer"] and trace["options"]["shots"] == 4

    # 2. tree-search synthesis with the gold decomposition as teacher
    synth = ok(run_dynrag(["synth", "--dataset", "2wikimultihopqa", "--data", str(stage_one), "--corpus", "contexts",
                           "--teacher", "dataset", "--k", "1", "--max-nodes", "8", "--model", "bundled:smollm2",
                           "--out", str(tmp_path / "synth")]))
    summary = json.loads(synth.stdout)
    assert summary["questions"] == 3 and summary["found"] >= 1, summary
    assert "ETA" in synth.stderr

    # 3. stage I
    imitation = ok(run_dynrag(["train", "imitation", "--data", str(tmp_path / "synth"), "--model", "bundled:smollm2",
                               "--out", str(tmp_path / "imi"),
                               "--epochs", "2", "--max-steps", "2", "--batch-size", "2", "--threads", "2"]))
    report = json.loads(imitation.stdout)
    assert report["steps"] == 2 and (tmp_path / "imi" / "model.safetensors").exists()
    assert (tmp_path / "imi" / "loss.png").exists() and len((tmp_path / "imi" / "train_log.jsonl").read_text().splitlines()) == 2
    assert "ETA" in imitation.stderr

    # 4. stage II: search again with the stage-I model, pairs, DPO
    calibration = ok(run_dynrag(["train", "calibration", "--model", f"hf:{tmp_path / 'imi'}", "--dataset", "2wikimultihopqa",
                                 "--data", str(stage_two), "--teacher", "dataset", "--k", "1", "--max-nodes", "8",
                                 "--shots", "4", "--heldout", "0",
                                 "--epochs", "2", "--max-steps", "2", "--batch-size", "2", "--lr", "1e-6", "--threads", "2",
                                 "--out", str(tmp_path / "coc")]))
    report = json.loads(calibration.stdout)
    assert report["stage"] == "calibration" and report["pairs"]["train"] >= 1
    assert report["prefers_chosen_before"]["train"] is not None and report["prefers_chosen_after"]["train"] is not None

    # 5. evaluation with the knowledge-boundary figures against a direct run
    common = ["--dataset", "2wikimultihopqa", "--data", str(held_out), "--corpus", "contexts", "--no-progress"]
    ok(run_dynrag(["eval", *common, "--method", "direct", "--model", "bundled:smollm2", "--out", str(tmp_path / "direct")]))
    evaluated = ok(run_dynrag(["eval", *common, "--method", "deeprag", "--model", f"hf:{tmp_path / 'coc'}",
                               "--baseline", str(tmp_path / "direct"), "--out", str(tmp_path / "deeprag")]))
    summary = json.loads((tmp_path / "deeprag" / "summary.json").read_text())
    assert summary["n"] == 2 and set(summary["knowledge_boundary"]) >= {"f1", "accuracy", "balanced_accuracy", "mcc"}
    assert "Knowledge boundary" in evaluated.stdout
    prediction = json.loads((tmp_path / "deeprag" / "predictions.jsonl").read_text().splitlines()[0])
    assert prediction["retrievals"] == len(prediction["queries"])
