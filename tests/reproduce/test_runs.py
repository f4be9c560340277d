"""`dynrag reproduce`: the paper settings of each run, data lookup, resuming, shared runs, the table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dynrag.errors import ConfigError, DataError
from dynrag.reproduce.runs import ReproduceRequest, reproduce
from dynrag.reproduce.render import render
from dynrag.reproduce.catalog import TABLES
from dynrag.reproduce.dragin import dragin_runs
from dynrag.reproduce.tables import published
from dynrag.methods.registry import parse_options
from tests.eval import fixtures as fx
from tests.fakes import method_factory as factory


def test_published_numbers_name_their_source_and_the_released_thresholds():
    data = published()
    for name in TABLES.names():
        assert name in data["tables"] and data["tables"][name]["source"]
    thresholds = [
        t for m in data["released_settings"]["dragin"]["models"].values() for t in m["dragin_threshold"].values()
    ]
    assert (min(thresholds), max(thresholds)) == (0.6, 1.5)  # not 1.0-1.4
    assert data["tables"]["dragin-table3"]["cells"]["Llama2-13b-chat"]["hotpotqa"]["dragin"]["retrievals"] == 3.505


def test_dragin_runs_carry_the_released_settings():
    runs = {r.key: r for r in dragin_runs("Llama2-7b-chat", ["hotpotqa"], ["direct", "fixed_length", "flare", "dragin"])}
    dragin = runs["dragin"].options
    assert (dragin["variant"], dragin["theta"], dragin["query_words"], dragin["chunk_tokens"]) == ("reference", 0.8, 35, 100)
    assert dragin["max_new_tokens"] == 100 and dragin["k"] == 3
    flare = runs["flare"].options
    assert (flare["trigger"], flare["theta"], flare["beta"]) == ("mean", 0.92, 0.92)  # 1 - 0.08
    assert runs["fixed_length"].options["first_retrieval"] is True
    assert runs["direct"].options == {"max_new_tokens": 100}
    for run in runs.values():  # every setting is a valid option set of its method
        parse_options(run.method, run.options)


def test_a_dataset_outside_the_paper_runs_with_the_settings_it_borrows():
    keys = ["direct", "single", "fixed_length", "fixed_sentence", "flare", "dragin"]
    (hotpot, musique) = (dragin_runs("Llama2-13b-chat", [ds], keys) for ds in ("hotpotqa", "musique"))
    assert [r.options for r in musique] == [r.options for r in hotpot]  # MuSiQue borrows HotpotQA's
    assert {r.dataset for r in musique} == {"musique"}
    table = TABLES.open("dragin-table2")
    assert table.datasets[-1] == "musique" and "musique" not in table.published_cells
    assert table.dataset_remarks["musique"].startswith("musique is not in the paper: its runs use hotpotqa's")


def request(tmp_path: Path, table: str, **kw) -> ReproduceRequest:
    files = fx.write_all(tmp_path)
    base = dict(table=table, data={"hotpotqa": files["hotpotqa"], "strategyqa": files["strategyqa"]},
                out=tmp_path / "runs", limit=2)
    base.update(kw)
    return ReproduceRequest(**base)


def answers():
    """The fake method answers h1 right and h2 ("yes") wrong, and StrategyQA's s2 right."""
    return {fx.HOTPOT[0]["question"]: fx.HOTPOT[0]["answer"], fx.HOTPOT[1]["question"]: "no",
            "Is Paris in Spain?": "no"}


def test_table3_runs_reports_missing_data_and_prints_differences(tmp_path):
    built = []
    req = request(tmp_path, "dragin-table3")
    report = reproduce(req, method_factory=factory(answers(), built=built), progress=False)
    assert sorted(report["missing"]) == ["2wikimultihopqa", "iirc", "musique"]
    assert "--data iirc=PATH" in report["missing"]["iirc"]
    assert len(built) == 8  # 4 methods x the 2 datasets with data
    configs = {c["method"]: c for c, _, _ in built if c["dataset"] == "hotpotqa"}
    assert configs["dragin"]["options"]["variant"] == "reference" and configs["dragin"]["options"]["theta"] == 1.2
    assert configs["dragin"]["scorer"] == "dragin" and configs["dragin"]["limit"] == 2
    text = render(report)
    # the fake method retrieves once per question: ours 1.00 beside the paper's 3.505
    assert "| DRAGIN | 1.00 | 3.50 | -2.50 |" in text
    assert "## iirc" in text and "no data" in text

    again = []
    reproduce(req, method_factory=factory(answers(), built=again), progress=False)
    assert again == []  # every run finished: resumed without answering anything


def test_table2_shares_the_runs_table3_made(tmp_path):
    reproduce(request(tmp_path, "dragin-table3", datasets=["hotpotqa"]), method_factory=factory(answers()),
              progress=False)
    built = []
    report = reproduce(request(tmp_path, "dragin-table2", datasets=["hotpotqa"]),
                       method_factory=factory(answers(), built=built), progress=False)
    assert sorted(c["method"] for c, _, _ in built) == ["direct", "single"]
    text = render(report)
    assert "| wo-RAG | 0.500 | 0.223 | +0.277 |" in text  # h1 answered right, h2 ("yes") wrong by the fake


def test_bad_requests_name_the_input(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        reproduce(request(tmp_path, "dragin-table2", data={"hotpotqa": tmp_path / "nope.json"}), progress=False)
    with pytest.raises(ConfigError, match="has datasets"):
        reproduce(request(tmp_path, "dragin-table2", data={"popqa": tmp_path / "x"}), progress=False)
    with pytest.raises(ConfigError, match="paper_model"):
        reproduce(request(tmp_path, "dragin-table2", options={"paper_model": "gpt-5"}), progress=False)
    with pytest.raises(ConfigError, match="choose one of"):
        reproduce(request(tmp_path, "deeprag-table9"), progress=False)
    with pytest.raises(ConfigError, match="has rows fixed_length"):
        reproduce(request(tmp_path, "dragin-table3", rows=["drgin"]), progress=False)


def test_workers_reach_every_runs_plan_and_a_bad_count_writes_nothing(tmp_path, monkeypatch):
    import dynrag.eval.runner as runner

    seen = []
    monkeypatch.setattr(runner, "run_eval", lambda plan, **kw: seen.append(plan.execution.workers) or None)
    reproduce(request(tmp_path, "dragin-table2", datasets=["hotpotqa"], rows=["direct", "dragin"], workers=2),
              progress=False)
    assert seen == [2, 2]
    with pytest.raises(ConfigError, match="--workers must be a number >= 1"):
        reproduce(request(tmp_path, "dragin-table2", workers=0, out=tmp_path / "bad"), progress=False)
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("table", ["deeprag-figure3", "bestpractice-table1", "bestpractice-figure3", "bestpractice-table2"])
def test_workers_are_refused_by_tables_that_answer_in_their_own_loop(tmp_path, table):
    from tests.cli_inprocess import run_in_process

    result = run_in_process("reproduce", table, "--workers", "2", "--out", tmp_path / "runs", "--no-run")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert f"--workers: {table} does not answer through eval runs" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_rows_filter_runs_only_those_rows(tmp_path):
    built = []
    reproduce(request(tmp_path, "dragin-table3", rows=["dragin"]), method_factory=factory(answers(), built=built),
              progress=False)
    assert sorted((c["dataset"], c["method"]) for c, _, _ in built) == [("hotpotqa", "dragin"), ("strategyqa", "dragin")]


def test_no_run_shows_the_published_numbers_only(tmp_path):
    report = reproduce(request(tmp_path, "dragin-table2", run=False), progress=False)
    text = render(report)
    assert "| DRAGIN | – | 0.337 | – | – | 0.442 | – |" in text
    assert "first 2 questions" in text
    assert not (tmp_path / "runs").exists()
    assert ", all questions, scorer" in render(reproduce(request(tmp_path, "dragin-table2", run=False, limit=None),
                                                          progress=False))
    remark = "musique is not in the paper: its runs use hotpotqa's"
    assert "## musique" in text and remark in text  # shown, without data: its cells are dashes
    alone = render(reproduce(request(tmp_path, "dragin-table2", run=False, datasets=["hotpotqa"]), progress=False))
    assert "## musique" not in alone and remark not in alone  # a dataset's remark only where it is shown


def test_bestpractice_rows_use_the_chain_options(tmp_path):
    files = fx.write_all(tmp_path)
    built = []
    req = ReproduceRequest(table="bestpractice-table11", data={"hotpotqa": files["hotpotqa"]}, out=tmp_path / "r",
                           limit=1)
    report = reproduce(req, method_factory=factory(answers(), built=built), progress=False)
    by_options = {json.dumps(c["options"].get("preset")) + c["retriever"]: c for c, _, _ in built}
    assert len(built) == 12 and '"best"hybrid' in by_options and '"none"hybrid' in by_options
    chains = {(c["options"].get("rerank"), c["options"].get("compress"), c["options"].get("repack")) for c, _, _ in built}
    assert {("lm", "none", "forward"), ("none", "extractive", "forward"), ("none", "none", "sides")} <= chains
    assert "| Hybrid with HyDE retrieval |" in render(report) and "11.71" in render(report)


def checkpoint(path: Path, base: str) -> str:
    """A stand-in for a `dynrag train` output trained from `base` (model specs are checked before a
    run is written; the CoT baseline is checked to be of the same base model)."""
    path.mkdir()
    (path / "config.json").write_text("{}")
    (path / "deeprag.json").write_text(json.dumps({"stage": "imitation", "base_model": base}))
    return f"hf:{path}"


def test_deeprag_table1_runs_the_checkpoints_against_cot_first(tmp_path):
    from dynrag.lm.loader import resolve_model

    imi = checkpoint(tmp_path / "imi", resolve_model("bundled"))
    checkpoint(tmp_path / "coc", imi)
    built = []
    req = request(tmp_path, "deeprag-table1", data={"hotpotqa": fx.write_all(tmp_path)["hotpotqa"]},
                  options={"imitation": f"hf:{tmp_path / 'imi'}", "calibration": f"hf:{tmp_path / 'coc'}"})
    report = reproduce(req, method_factory=factory(answers(), built=built), progress=False)
    order = [(c["method"], c["model"]) for c, _, _ in built]
    assert order[0][0] == "direct"  # the baseline of every other row runs first
    assert ("deeprag", f"hf:{tmp_path / 'imi'}") in order and ("deeprag", f"hf:{tmp_path / 'coc'}") in order
    # CoT, CoT-Retrieve, FLARE, DRAGIN, deeprag untrained, the two checkpoints and IterDRAG-style; never
    # the six rows that need models of their own
    assert len(built) == 8 and sorted(report["missing"]) == ["2wikimultihopqa", "musique", "popqa"]
    assert ("deeprag", "always") in [(c["method"], c["options"].get("decision")) for c, _, _ in built]
    deeprag = report["results"][("hotpotqa", "deeprag")]
    # the fake retrieves for every question and CoT gets h1 right: one false negative, one true negative
    assert deeprag["knowledge_boundary"]["fn"] == 1 and deeprag["knowledge_boundary"]["tn"] == 1
    text = render(report)
    assert "| DeepRAG | 0.500 | 0.407 | +0.093 |" in text
    assert "| deeprag untrained (ours only) | 0.500 |" in text
    assert "| UAR (a trained classifier): published only | – | 0.297 | – |" in text


def test_deeprag_table3_shows_the_published_boundary_figures(tmp_path):
    text = render(reproduce(request(tmp_path, "deeprag-table3", data={}, run=False), progress=False))
    assert "| DeepRAG" not in text  # no checkpoints given: only the untrained row
    assert "| FLARE | – | 0.000 | – | – | 0.718 |" in text and "| DRAGIN | – | 0.007 |" in text
    assert "_no data: give --data 2wikimultihopqa=PATH" in text


def test_deeprag_rows_leave_their_limits_to_the_dataset():
    for name in ("deeprag-table1", "deeprag-table3", "deeprag-figure4"):
        table = TABLES.open(name, {"calibration": "bundled", "imitation": "bundled"})
        deeprag = [s for s in table.runs if s.method == "deeprag"]
        assert deeprag and {s.dataset for s in deeprag} == set(table.datasets)
        for spec in deeprag:
            # the run plan fills them from the dataset's entry (tests/deeprag/test_limits.py)
            assert "max_steps" not in spec.options and "max_retrievals" not in spec.options, (name, spec)
            parse_options(spec.method, spec.options)
        assert all("max_steps" not in s.options for s in table.runs if s.method in ("direct", "single"))
        # the baselines' BM25 queries are cut to 64 tokens, as in the DRAGIN authors' code the paper follows
        assert all(s.options.get("max_query_tokens") == 64 for s in table.runs if s.method in ("single", "flare", "dragin"))


def test_a_checkpoint_trained_from_another_model_is_not_compared_with_this_cot(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text("{}")
    imi = checkpoint(tmp_path / "imi", f"hf:{other}")
    req = request(tmp_path, "deeprag-table1", data={"hotpotqa": fx.write_all(tmp_path)["hotpotqa"]}, rows=["deeprag_imi"],
                  options={"imitation": imi})
    with pytest.raises(ConfigError, match=r"--baseline .*/hotpotqa/cot-\w+-n2: made with model 'bundled:.*', but "
                                          r"this run's model 'hf:.*imi' \(trained from hf:.*other\) has another base"):
        reproduce(req, method_factory=factory(answers()), progress=False)


def test_the_header_says_when_the_deltas_set_a_contexts_pool_against_wikipedia(tmp_path):
    contexts = render(reproduce(request(tmp_path, "deeprag-table1", data={}, run=False), progress=False))
    assert "| method (Δ: our `contexts` pool vs the paper's BM25 over Wikipedia) | EM ours | EM paper | EM Δ |" in contexts
    dragin = render(reproduce(request(tmp_path, "dragin-table3", data={}, run=False), progress=False))
    assert "| method (Δ: our `contexts` pool vs the paper's BM25 over Wikipedia) | retrievals/question ours |" in dragin
    index = render(reproduce(request(tmp_path, "deeprag-table1", data={}, run=False, corpus=str(tmp_path / "wiki")),
                             progress=False))
    assert "| method | EM ours |" in index and "Δ: our" not in index
    figure = render(reproduce(request(tmp_path, "deeprag-figure4", data={}, run=False), progress=False))
    # no published column: nothing to qualify, no "ours", no Δ
    assert "| method | EM | F1 |" in figure and "Δ" not in figure


def test_deeprag_figure4_forces_every_decision_one_way_then_lets_the_model_decide(tmp_path):
    (tmp_path / "coc").mkdir()
    (tmp_path / "coc" / "config.json").write_text("{}")
    built = []
    req = request(tmp_path, "deeprag-figure4", data={"hotpotqa": fx.write_all(tmp_path)["hotpotqa"]},
                  options={"calibration": f"hf:{tmp_path / 'coc'}"})
    report = reproduce(req, method_factory=factory(answers(), built=built), progress=False)
    assert [(c["method"], c["options"]["decision"]) for c, _, _ in built] == [
        ("deeprag", "never"), ("deeprag", "always"), ("deeprag", "generate")]
    assert {c["model"] for c, _, _ in built} == {f"hf:{tmp_path / 'coc'}"}
    assert sorted(report["missing"]) == ["2wikimultihopqa"]
    text = render(report)
    assert "| parametric only (decision=never) | 0.500 |" in text and "EM paper" not in text


def test_dragin_tables_cut_every_query_to_64_tokens_as_the_authors():
    table = TABLES.open("dragin-table2", {})
    retrieving = [s for s in table.runs if s.method != "direct"]
    assert retrieving and all(s.options.get("max_query_tokens") == 64 for s in retrieving)


@pytest.mark.parametrize("table, rows", [("dragin-table2", "direct, single"), ("world", "direct, single"),
                                         ("bestpractice-table6", "bm25")])
def test_an_unknown_row_is_the_first_and_only_thing_said(tmp_path, table, rows):
    from tests.cli_inprocess import run_in_process

    # No data, no --world and a table with a default limit: each would print a note or fail first.
    result = run_in_process("reproduce", table, "--row", "nosuch", "--out", tmp_path / "runs", "--no-progress")
    assert result.returncode == 1 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: --row 'nosuch': table {table!r} has rows {rows}")
    assert not (tmp_path / "runs").exists()


def test_a_row_whose_method_the_backend_cannot_serve_moves_to_one_that_can(tmp_path, monkeypatch):
    from dataclasses import replace

    from dynrag.lm.base import BACKEND_CAPABILITIES
    from dynrag.reproduce.runs import capable_runs, run_dir

    table = TABLES.open("dynamic-family")
    # llama.cpp reads hidden states too, so every row stays; a llama.cpp without them shows the move
    assert capable_runs(table.runs, "bundled:qwen2.5-0.5b?backend=llama.cpp") == table.runs
    monkeypatch.setitem(BACKEND_CAPABILITIES, "llama.cpp", replace(BACKEND_CAPABILITIES["llama.cpp"], hidden_states=False))
    rows = capable_runs(table.runs, "bundled:qwen2.5-0.5b?backend=llama.cpp&kv_slots=2")
    moved = [r for r in rows if r.model is not None]
    assert {r.method for r in moved} == {"seakr"} and len(moved) == len(table.datasets)
    assert all(r.model == "bundled:qwen2.5-0.5b?kv_slots=2&backend=transformers" for r in moved)
    assert all(r.label == "SeaKR (transformers backend)" for r in moved)
    assert [r for r in rows if r.model is None] == [r for r in table.runs if r.method != "seakr"]
    # the transformers model is part of the row's identity: its run directory is not a llama.cpp one's
    req = ReproduceRequest(table="dynamic-family", out=tmp_path, model="bundled:qwen2.5-0.5b?backend=llama.cpp")
    seakr = next(r for r in table.runs if r.method == "seakr")
    on_transformers = next(r for r in moved if r.dataset == seakr.dataset)
    assert run_dir(req, on_transformers) != run_dir(req, seakr)
    for model in ("bundled", "bundled:qwen2.5-0.5b?backend=transformers", "openai:http://127.0.0.1:9/v1#m"):
        assert capable_runs(table.runs, model) == table.runs  # already able, or a server: left to refuse
