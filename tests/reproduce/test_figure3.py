"""`reproduce bestpractice-figure3` on a tiny dataset with a scripted model: which passages each
context gives, coverage per cell, the table, resume, and bad flags."""

import json
import re

import pytest

from dynrag.errors import ConfigError
from dynrag.reproduce.bestpractice_figure3 import Figure3Plan, figure3, render_figure3
from tests.cli_inprocess import run_in_process
from tests.deeprag.conftest import wiki_record, write_wiki
from tests.fakes import ScriptedLM

N = 4
ANSWERS = {wiki_record(i)["question"]: wiki_record(i)["answer"] for i in range(N)}


def reader_lm(name, reads_documents=True):
    """Answers with the town its question's answer names when the documents hold it, else 'Nowhere'."""
    def reply(prompt):
        question = re.findall(r"Question: (.*)\nAnswer:", prompt)[-1]
        documents = prompt.split("Documents:\n", 1)[1].split("Question:", 1)[0] if "Documents:\n" in prompt else ""
        town = ANSWERS[question]
        return f"So the answer is {town if reads_documents and town in documents else 'Nowhere'}."
    return ScriptedLM(reply, name=name)


def test_cells_score_coverage_per_context_and_resume_without_answering_again(tmp_path):
    data = write_wiki(tmp_path / "dev.json", N)
    models = {"fake-base": reader_lm("fake-base", reads_documents=False), "fake-gr": reader_lm("fake-gr")}
    req = Figure3Plan("2wikimultihopqa", data, {"gr": "fake-gr"}, "fake-base", limit=None, out=tmp_path / "runs")
    report = figure3(req, progress=False, load=models.__getitem__)
    cov = {cell: s["coverage"] for cell, s in report["results"].items()}
    assert cov == {("base", "g"): 0.0, ("base", "r"): 0.0, ("base", "gr"): 0.0, ("base", "none"): 0.0,
                   ("gr", "g"): 1.0, ("gr", "r"): 0.0, ("gr", "gr"): 1.0, ("gr", "none"): 0.0}
    cell = tmp_path / "runs" / "fake-gr" / "2wikimultihopqa" / "figure3-gr-nall"
    records = [json.loads(line) for line in (cell / "predictions.jsonl").read_text().splitlines()]
    assert len(records) == N and all(len(r["passages"]) == 3 for r in records)  # two gold, one random
    assert records[0]["final_answer"] == wiki_record(0)["answer"] and records[0]["em"] == 1.0
    table = render_figure3(report)
    assert "| M_gr | 1.000 (1.000 / 1.000) | 0.000 (0.000 / 0.000) | 1.000 (1.000 / 1.000) |" in table
    assert "paper" not in table.split("\n")[4]  # no published column: the figure's values are not given
    # the finding per metric: 4 questions M_gr covers and the base does not: 2 * 0.5^4 = 0.125
    assert ("- M_gr covers the answer best under D_g (extracted answer): vs M_b (base) +1.000, n 4, p 0.125 "
            "(McNemar, exact): **undetermined**.") in table
    assert "under D_gr (whole text)" in table

    # A cut run: one cell lost its last two answers; the rerun answers only those.
    lines = (cell / "predictions.jsonl").read_text().splitlines(keepends=True)
    (cell / "predictions.jsonl").write_text("".join(lines[:2]) + lines[2][:10])  # a torn line as after kill -9
    for lm in models.values():
        lm.prompts.clear()
    opened = []
    again = figure3(req, progress=False, load=lambda spec: opened.append(spec) or models[spec])
    assert opened == ["fake-gr"]  # the base's cells are finished: it is not even loaded
    assert len(models["fake-base"].prompts) == 0 and len(models["fake-gr"].prompts) == 2
    assert again["results"][("gr", "gr")]["n"] == N
    ids = [json.loads(line)["id"] for line in (cell / "predictions.jsonl").read_text().splitlines()]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == N


def test_changed_settings_are_refused_and_bad_flags_named(tmp_path):
    data = write_wiki(tmp_path / "dev.json", N)
    lm = reader_lm("fake-base")
    req = Figure3Plan("2wikimultihopqa", data, {}, "fake-base", limit=2, out=tmp_path / "runs")
    figure3(req, progress=False, load=lambda spec: lm)
    with pytest.raises(ConfigError, match="different config"):
        figure3(Figure3Plan("2wikimultihopqa", data, {}, "fake-base", limit=2, out=tmp_path / "runs", seed=1),
                progress=False, load=lambda spec: lm)
    base = ["reproduce", "bestpractice-figure3", "--dataset", "2wikimultihopqa", "--data", str(data)]
    missing = run_in_process(*base, "--reader", f"gr={tmp_path / 'nowhere'}", "--out", str(tmp_path / "o"))
    assert missing.returncode != 0 and "--reader" in missing.stderr and "no such directory" in missing.stderr
    no_pair = run_in_process(*base, "--reader", "gr", "--out", str(tmp_path / "o"))
    assert no_pair.returncode != 0 and "Traceback" not in no_pair.stderr
    other = run_in_process("reproduce", "dragin-table2", "--reader", "gr=x", "--no-run")
    assert other.returncode != 0 and "only `reproduce bestpractice-figure3`" in other.stderr
    for pair, says in (("order=last", "--option order 'last': choose one of gold_first, shuffled"),
                       ("shuffle=1", "unknown --option 'shuffle'")):
        bad = run_in_process(*base, "--option", pair, "--out", str(tmp_path / "o"))
        assert bad.returncode != 0 and says in bad.stderr and "Traceback" not in bad.stderr


def test_a_shuffled_order_gets_cells_of_its_own_and_moves_the_gold_passages(tmp_path):
    data = write_wiki(tmp_path / "dev.json", N)
    models = {"fake-gr": reader_lm("fake-gr")}
    first = Figure3Plan("2wikimultihopqa", data, {"gr": "fake-gr"}, "fake-gr", out=tmp_path / "runs")
    shuffled = Figure3Plan("2wikimultihopqa", data, {"gr": "fake-gr"}, "fake-gr", out=tmp_path / "runs",
                              order="shuffled")
    figure3(first, progress=False, load=models.__getitem__)
    report = figure3(shuffled, progress=False, load=models.__getitem__)  # beside the first cells, not refused
    assert report["results"][("gr", "gr")]["coverage"] == 1.0  # a reader that reads finds the gold anywhere
    cells = tmp_path / "runs" / "fake-gr" / "2wikimultihopqa"
    assert (cells / "figure3-gr-nall").is_dir() and (cells / "figure3-gr-nall-shuffled").is_dir()
    plain, moved = ([json.loads(line)["passages"] for line in (cells / name / "predictions.jsonl").read_text().splitlines()]
                    for name in ("figure3-gr-nall", "figure3-gr-nall-shuffled"))
    assert all(sorted(a) == sorted(b) for a, b in zip(plain, moved)) and plain != moved
    assert "passages in a seeded order per question" in render_figure3(report)
