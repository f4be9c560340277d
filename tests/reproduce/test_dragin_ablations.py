"""DRAGIN's Tables 5 and 7: their rows, the θ option, and the claims decided from the rows' records."""

import json

import pytest

from dynrag.errors import ConfigError
from dynrag.methods.registry import parse_options
from dynrag.reproduce.catalog import open_table
from dynrag.reproduce.dragin_ablations import retriever_claims, sweep_claims


def test_table5_is_the_table2_dragin_row_at_each_theta():
    table = open_table("dragin-table5", {"thetas": "0.5,1,1.5"})
    assert [r.key for r in table.runs] == ["theta_0.5", "theta_1", "theta_1.5"]
    assert [r.options["theta"] for r in table.runs] == [0.5, 1.0, 1.5]
    assert {r.options["variant"] for r in table.runs} == {"reference"} and table.datasets == ["hotpotqa"]
    for run in table.runs:
        parse_options(run.method, run.options)


def test_table5_refuses_a_bad_grid_naming_it():
    with pytest.raises(ConfigError, match="thetas"):
        open_table("dragin-table5", {"thetas": "0.5,high"})
    with pytest.raises(ConfigError, match="at least two"):
        open_table("dragin-table5", {"thetas": "0.5"})


def test_table7_runs_flare_and_dragin_on_both_retrievers():
    table = open_table("dragin-table7")
    hotpot = [r for r in table.runs if r.dataset == "hotpotqa"]
    assert [(r.key, r.retriever) for r in hotpot] == [("flare_bm25", "bm25"), ("flare_dense", "dense"),
                                                       ("dragin_bm25", "bm25"), ("dragin_dense", "dense")]


def summary_with(tmp_path, name, records):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return {"run_dir": str(folder)}


def only_one_row_right(tmp_path, table, winner, n):
    """Every HotpotQA row of ``table`` run on ``n`` questions, only row ``winner`` answering them right."""
    return {("hotpotqa", r.key): summary_with(tmp_path, r.key, [{"id": i, "em": int(r.key == winner)} for i in range(n)])
            for r in table.runs if r.dataset == "hotpotqa"}


def test_sweep_claims_test_the_widest_gap_and_the_trend(tmp_path):
    table = open_table("dragin-table5", {"thetas": "0.6,1.4"})
    low, high = table.runs
    # θ 0.6: every question right, 2 retrievals each; θ 1.4: every one wrong, none retrieved
    results = {("hotpotqa", low.key): summary_with(tmp_path, "a", [{"id": i, "em": 1, "retrievals": 2} for i in range(8)]),
               ("hotpotqa", high.key): summary_with(tmp_path, "b", [{"id": i, "em": 0, "retrievals": 0} for i in range(8)])}
    lines = sweep_claims(table.runs, results)
    assert any("EM is insensitive to θ" in t and "= +1.000" in t and "p = 0.0078" in t and "**does not hold**" in t
               for t in lines)  # 2 of the 2^8 sign patterns are as extreme
    assert any("Retrievals fall as θ rises" in t and "ρ = -1.000" in t.replace("−", "-") and "**holds**" in t for t in lines)
    assert sweep_claims(table.runs, {}) == []


def test_retriever_claims_are_paired_on_the_questions_both_rows_answered(tmp_path):
    table = open_table("dragin-table7")
    results = {("hotpotqa", "dragin_bm25"): summary_with(tmp_path, "a", [{"id": i, "em": 1} for i in range(6)]),
               ("hotpotqa", "dragin_dense"): summary_with(tmp_path, "b", [{"id": i, "em": 0} for i in range(4)])}
    lines = retriever_claims(table.runs, ["hotpotqa"], results)
    (claim,) = [t for t in lines if t.startswith("- hotpotqa")]
    assert "n = 4" in claim and "p = 0.125" in claim and "**undetermined**" in claim  # 2 / 2^4


def test_table6_sets_each_query_form_on_the_table2_dragin_row():
    table = open_table("dragin-table6")
    hotpot = {r.key: r.options for r in table.runs if r.dataset == "hotpotqa"}
    assert list(hotpot) == ["query_qfs", "query_confident_sentence", "query_last_words", "query_previous_sentence",
                            "query_full_context"]
    assert hotpot["query_confident_sentence"]["query_min_prob"] == pytest.approx(0.9)  # 1 - h, h = 0.1 released
    assert hotpot["query_last_words"]["query_words"] == 25 and hotpot["query_qfs"]["query_words"] == 35
    for run in table.runs:
        parse_options(run.method, run.options)


def test_table6_claims_put_qfs_against_every_other_form(tmp_path):
    from dynrag.reproduce.dragin_ablations import query_claims

    table = open_table("dragin-table6")
    results = only_one_row_right(tmp_path, table, "query_qfs", 5)
    lines = [t for t in query_claims(table.runs, ["hotpotqa"], results) if t.startswith("- hotpotqa")]
    assert len(lines) == 6  # QFS against four forms, FLARE's against two
    assert sum("DRAGIN's QFS −" in t and "+1.000" in t and "p = 0.0625" in t for t in lines) == 4  # 2 / 2^5


def test_table4_gives_every_method_the_last_finished_sentence_as_its_query():
    table = open_table("dragin-table4")
    hotpot = {r.key: r for r in table.runs if r.dataset == "hotpotqa"}
    assert list(hotpot) == ["timing_fixed_length", "timing_fixed_sentence", "timing_flare", "timing_dragin"]
    assert {k: r.options.get("query") for k, r in hotpot.items()} == {
        "timing_fixed_length": "previous_sentence", "timing_fixed_sentence": None,
        "timing_flare": "previous_sentence", "timing_dragin": "previous_sentence"}
    assert hotpot["timing_dragin"].options["theta"] == 1.2  # Table 2's released value stays
    for run in table.runs:
        parse_options(run.method, run.options)


def test_table2_decides_dragin_against_every_baseline(tmp_path):
    from dynrag.reproduce.dragin import table2_claims

    table = open_table("dragin-table2")
    results = only_one_row_right(tmp_path, table, "dragin", 6)
    lines = [t for t in table2_claims(table.runs, results) if t.startswith("- hotpotqa")]
    assert len(lines) == 5 and all("+1.000" in t and "p = 0.0312" in t and "**holds**" in t for t in lines)  # 2 / 2^6


@pytest.mark.parametrize("name", ["dragin-table4", "dragin-table5", "dragin-table6", "dragin-table7"])
def test_every_ablation_shows_how_often_each_row_retrieved(name):
    table = open_table(name)
    titles = {ds: [c.title for c in table.columns(ds)] for ds in table.datasets}
    assert all(t[-1] == "retrievals/question" and t.count("retrievals/question") == 1 for t in titles.values())
    assert titles.get("hotpotqa", [])[:2] == ["EM", "F1"]
    assert titles.get("strategyqa", ["accuracy"])[0] == "accuracy"  # yes/no: the paper's metric
