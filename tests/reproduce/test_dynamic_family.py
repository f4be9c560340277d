"""`dynrag reproduce dynamic-family`: every training-free method on a world or on HotpotQA and 2Wiki,
the published cells beside ours, and each method against DRAGIN by McNemar."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from dynrag.cli import app
from dynrag.errors import ConfigError
from dynrag.methods.registry import METHODS, method_traits, parse_options
from dynrag.reproduce.catalog import open_table
from dynrag.reproduce.claims import decided_in
from dynrag.reproduce.dragin import dragin_runs
from dynrag.reproduce.dynamic_family import LABELS, against_dragin, decision_mcc
from dynrag.reproduce.record_build import RunContext, table_record
from dynrag.reproduce.records import load_record, write_record
from dynrag.reproduce.render import render, render_lines
from dynrag.reproduce.runs import ReproduceRequest, reproduce, run_dir
from dynrag.reproduce.tables import paper_cells
from dynrag.reproduce.world import WorldTableOptions, world_runs
from tests.eval import fixtures as fx
from tests.fakes import method_factory
from tests.reproduce.test_runs import answers, request
from tests.reproduce.test_tuned import tune_dir
from tests.reproduce.test_world import factory as world_factory, world  # noqa: F401  (the tiny world fixture)

TABLE = "dynamic-family"
KEYS = ["single", "fixed_length", "fixed_sentence", "flare", "dragin", "dragin_paper", "ircot", "seakr", "etc"]


def by_dataset(table) -> dict[str, dict[str, object]]:
    rows: dict[str, dict[str, object]] = {}
    for spec in table.runs:
        rows.setdefault(spec.dataset, {})[spec.key] = spec
    return rows


# ---- the runs ------------------------------------------------------------------------------------


def test_every_training_free_method_runs_on_each_dataset():
    table = open_table(TABLE)
    rows = by_dataset(table)
    assert table.datasets == ["world", "hotpotqa", "2wikimultihopqa"] and len(table.runs) == 27
    assert all(list(r) == KEYS for r in rows.values())
    # every retrieving method of the registry but deeprag, which is trained, has a row
    retrieving = {n for n in METHODS.names() if method_traits(n).needs_retrieval} - {"deeprag"}
    assert {s.method for s in table.runs} == retrieving
    for spec in table.runs:
        parse_options(spec.method, spec.options)  # each a valid option set
        assert spec.label == LABELS[spec.key]
    assert {s.scorer for s in rows["world"].values()} == {"squad"}  # as `reproduce world` scores
    assert {s.scorer for ds in ("hotpotqa", "2wikimultihopqa") for s in rows[ds].values()} == {None}  # the table's
    assert table.scorer == "dragin"


def test_world_rows_share_reproduce_worlds_settings():
    rows = by_dataset(open_table(TABLE))["world"]
    world_table = {s.key: s.options for s in world_runs(WorldTableOptions())}
    for ours, theirs in [("single", "single"), ("fixed_length", "fixed_length"), ("fixed_sentence", "fixed_sentence"),
                         ("flare", "flare"), ("dragin", "dragin_reference"), ("dragin_paper", "dragin")]:
        assert rows[ours].options == world_table[theirs]  # same options: the same run directory's settings
    assert rows["dragin"].options["variant"] == "reference" and rows["dragin_paper"].options["variant"] == "paper"
    for key in ("ircot", "seakr", "etc"):
        assert rows[key].options == {"k": 3}


def test_a_row_both_tables_have_is_one_run_directory_under_the_world_tables_name(tmp_path):
    req = request(tmp_path, TABLE)
    ours = by_dataset(open_table(TABLE))["world"]
    world_table = {s.key: s for s in world_runs(WorldTableOptions())}
    for key, theirs in [("dragin", "dragin_reference"), ("dragin_paper", "dragin"), ("flare", "flare")]:
        assert run_dir(req, ours[key]) == run_dir(req, world_table[theirs])
        assert run_dir(req, ours[key]).name.startswith(f"{theirs}-")
    assert run_dir(req, ours["dragin"]) != run_dir(req, ours["dragin_paper"])
    assert run_dir(req, ours["etc"]).name.startswith("etc-")


def test_benchmark_rows_take_dragins_released_settings_and_each_papers_defaults():
    table = open_table(TABLE, {"paper_model": "Llama2-7b-chat"})
    rows = by_dataset(table)["hotpotqa"]
    released = {s.key: s.options for s in dragin_runs("Llama2-7b-chat", ["hotpotqa"], KEYS[:5])}
    for key in KEYS[:5]:
        assert rows[key].options == released[key]  # DRAGIN Table 2's runs, so their directories are shared
    assert (rows["dragin"].options["theta"], rows["dragin"].options["query_words"]) == (0.8, 35)
    paper = parse_options("dragin", rows["dragin_paper"].options)
    assert paper.variant == "paper" and paper.max_new_tokens == 100 and paper.max_query_tokens == 64
    ircot, seakr, etc = (parse_options(k, rows[k].options) for k in ("ircot", "seakr", "etc"))
    assert (ircot.max_paragraphs, ircot.max_steps, ircot.variant, ircot.k, ircot.max_new_tokens) == (15, 10, "paper", 3, 100)
    assert (seakr.threshold, seakr.samples, seakr.max_steps, seakr.max_docs, seakr.variant) == (-6.0, 20, 7, 5, "paper")
    assert (etc.theta, etc.chunk_tokens, etc.max_new_tokens, etc.max_retrievals) == (1.3, 64, 100, 100)
    wiki = by_dataset(table)["2wikimultihopqa"]
    assert {wiki[k].options["max_new_tokens"] for k in KEYS} == {64}  # the released 2Wiki budget for all


def test_with_a_world_only_the_world_runs_and_without_one_only_the_benchmarks(tmp_path, world):  # noqa: F811
    with pytest.raises(ConfigError, match="with --world, dynamic-family runs on the world's test split only"):
        reproduce(ReproduceRequest(table=TABLE, world=world, datasets=["hotpotqa"], out=tmp_path, run=False),
                  progress=False)
    with pytest.raises(ConfigError, match="--dataset world: give --world DIR"):
        reproduce(ReproduceRequest(table=TABLE, datasets=["world"], out=tmp_path, run=False), progress=False)
    report = reproduce(ReproduceRequest(table=TABLE, out=tmp_path, run=False), progress=False)
    assert report["datasets"] == ["hotpotqa", "2wikimultihopqa"]


# ---- --no-run: the published cells ---------------------------------------------------------------


def test_no_run_prints_dragins_published_cells_beside_empty_rows(tmp_path):
    text = render(reproduce(ReproduceRequest(table=TABLE, out=tmp_path, run=False), progress=False))
    assert "## world" not in text and "## hotpotqa" in text and "## 2wikimultihopqa" in text
    assert "scorer dragin. Paper: Llama2-13b-chat (DRAGIN Tables 2 and 3" in text
    # Table 2's EM and F1 and Table 3's retrievals, read from their entries
    assert "| DRAGIN (reference variant) | – | 0.337 | – | – | 0.442 | – | – | 3.50 | – | – |" in text
    assert "| single retrieval (SR-RAG) | – | 0.263 | – | – | 0.371 | – | – | – | – | – |" in text
    assert "| FLARE | – | 0.224 | – | – | 0.308 | – | – | 1.59 | – | – |" in text  # 2Wiki
    for label in ("DRAGIN (paper variant)", "IRCoT", "SeaKR", "ETC"):
        assert f"| {label} | – | – | – | – | – | – | – | – | – | – |" in text
    assert "Source: HotpotQA and 2WikiMultihopQA: DRAGIN Table 2 (EM, F1) and Table 3" in text
    assert "### Each method against DRAGIN" not in text  # nothing ran: no claim line

    seven = render(reproduce(ReproduceRequest(table=TABLE, out=tmp_path, run=False,
                                              options={"paper_model": "Llama2-7b-chat"}), progress=False))
    assert "| DRAGIN (reference variant) | – | 0.237 | – | – | 0.342 | – |" in seven  # no Table 3 cells typed


def test_the_cells_are_dragins_own_typed_once():
    cells = paper_cells(TABLE, "Llama2-13b-chat")
    assert cells["hotpotqa"]["dragin"] == {**paper_cells("dragin-table2", "Llama2-13b-chat")["hotpotqa"]["dragin"],
                                           **paper_cells("dragin-table3", "Llama2-13b-chat")["hotpotqa"]["dragin"]}
    assert not any(k in cells.get(ds, {}) for ds in ("hotpotqa", "2wikimultihopqa")
                   for k in ("dragin_paper", "ircot", "seakr", "etc"))
    assert paper_cells(TABLE, "Vicuna-13b-v1.5") == {}


def test_the_command_prints_the_table_without_running(tmp_path):
    r = CliRunner().invoke(app, ["reproduce", TABLE, "--no-run", "--out", str(tmp_path)], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    assert "| DRAGIN (reference variant) | – | 0.337 |" in r.output


# ---- the claim lines -----------------------------------------------------------------------------


def records(right: set[int], n: int = 12, extra: tuple[str, ...] = ()) -> list[dict]:
    rows = [{"id": f"q{i}", "em": 1.0 if i in right else 0.0, "retrievals": 1} for i in range(n)]
    return rows + [{"id": q, "em": 1.0, "retrievals": 1} for q in extra]


def test_each_method_against_dragin_by_exact_mcnemar():
    rows = {
        "dragin": records(set(range(10))),  # right on q0-q9 of 12
        "flare": records({0, 1}, extra=("q99",)),  # q99: not asked of DRAGIN, so not paired
        "seakr": records({0, 1, 2, 10}),
        "etc": records(set()),
        "ircot": None,  # not run: no line
    }
    lines = against_dragin("hotpotqa", rows, LABELS)
    # FLARE: 8 questions only DRAGIN answers, none only FLARE: p = 2 * 0.5^8 = 0.0078
    assert lines[0] == ("- hotpotqa: DRAGIN (reference variant) answers more than FLARE (DRAGIN Table 2): EM 0.833 "
                        "vs 0.167; McNemar (exact), n 12, p 0.008: **holds**.")
    # SeaKR, claimed ahead: 1 question only SeaKR answers, 7 only DRAGIN: p = 2 * (1 + 8) / 2^8 = 0.0703
    assert lines[1] == ("- hotpotqa: SeaKR answers more than DRAGIN (reference variant) (SeaKR's claim): EM 0.333 "
                        "vs 0.833; McNemar (exact), n 12, p 0.070: **undetermined**.")
    # ETC, claimed ahead, answers none of DRAGIN's 10: p = 2 * 0.5^10 = 0.00195, the other way
    assert lines[2] == ("- hotpotqa: ETC answers more than DRAGIN (reference variant) (ETC's claim): EM 0.000 "
                        "vs 0.833; McNemar (exact), n 12, p 0.002: **does not hold**.")
    assert len(lines) == 3
    flare, seakr, etc = decided_in(lines)
    assert (flare.dataset, flare.test, flare.n, flare.verdict) == ("hotpotqa", "McNemar (exact)", 12, "holds")
    assert flare.ledger == "dragin.table2.dragin-above-flare" and flare.difference == pytest.approx(8 / 12)
    assert flare.p == pytest.approx(2 * 0.5 ** 8)
    assert seakr.p == pytest.approx(18 / 256) and seakr.ledger is None
    assert etc.difference == pytest.approx(-10 / 12) and etc.ledger is None
    assert against_dragin("hotpotqa", {**rows, "dragin": None}, LABELS) == []  # no DRAGIN row: nothing to test


def test_the_worlds_decision_mcc_per_row_has_a_bootstrap_interval():
    knows = [{"id": f"k{i}", "retrievals": 0, "needs_retrieval": False} for i in range(10)]
    needs = [{"id": f"n{i}", "retrievals": 2, "needs_retrieval": True} for i in range(10)]
    always = [{**r, "retrievals": 1} for r in knows + needs]
    lines = decision_mcc({"dragin": knows + needs, "single": always, "ircot": None}, LABELS)
    assert lines == ["- DRAGIN (reference variant): 1.000 (n 20, 95% bootstrap interval 1.000 to 1.000)",
                     "- single retrieval (SR-RAG): 0.000 (n 20, 95% bootstrap interval 0.000 to 0.000)"]


# ---- end to end with scripted methods ------------------------------------------------------------


def test_the_world_runs_every_method_and_prints_claims_and_a_record(tmp_path, world):  # noqa: F811
    built: list = []
    req = ReproduceRequest(table=TABLE, world=world, out=tmp_path / "runs")
    report = reproduce(req, method_factory=world_factory(world, built), progress=False)
    assert [c["method"] for c in built] == ["single", "fixed_length", "fixed_sentence", "flare", "dragin", "dragin",
                                            "ircot", "seakr", "etc"]
    assert {c["dataset"] for c in built} == {"world"} and {c["scorer"] for c in built} == {"squad"}
    lines = render_lines(report)
    text = "\n".join(lines)
    assert "## world" in text and "## hotpotqa" not in text and "scorer squad." in text
    assert "| method | EM | F1 | retrievals/question | question MCC | s/question |" in text
    # the scripted DRAGIN and FLARE retrieve only where a hop is unknown: question MCC 1
    assert "| FLARE | 0.419 | 0.419 | 0.71 | 1.000 |" in text
    assert "| single retrieval (SR-RAG) | 1.000 | 1.000 | 1.00 | 0.000 |" in text
    # single answers the 18 multi-hop questions DRAGIN does not: p = 2 * 0.5^18
    assert ("- world: DRAGIN (reference variant) answers more than single retrieval (SR-RAG) (DRAGIN Table 2): "
            "EM 0.419 vs 1.000; McNemar (exact), n 31, p 7.6e-06: **does not hold**.") in text
    assert ("- world: DRAGIN (reference variant) answers more than FLARE (DRAGIN Table 2): EM 0.419 vs 0.419; "
            "McNemar (exact), n 31, p 1.000: **undetermined**.") in text
    assert "- FLARE: 1.000 (n 31, 95% bootstrap interval 1.000 to 1.000)" in text

    record = table_record(report, lines, RunContext("dynrag reproduce dynamic-family --world W", 2.0, None, None))
    assert record.table == TABLE and record.datasets == ["world"] and len(record.rows) == 9
    assert record.corpus == f"world:{world.name}" and record.published == {}
    named = {c.claim for c in record.claims}
    assert "dragin.table2.dragin-above-single" in named and None in named  # IRCoT's, SeaKR's, ETC's: not the ledger's
    assert load_record(write_record(tmp_path / "results", record)) == record
    assert record.rows[3].cells["question_mcc"] == 1.0 and record.rows[3].scores["needs_retrieval"].count(1) > 0

    # every run directory gone: the rows come back from the record, with the same table and lines
    from dynrag.reproduce.carried_rows import carry_rows

    again = reproduce(req.model_copy(update={"run": False, "out": tmp_path / "gone"}), progress=False)
    assert set(again["results"].values()) == {None}
    assert len(carry_rows(again, tmp_path / "results")) == 9
    def body(printed):  # all but the corpus line (another --out) and the carried rows' remark
        return [line for line in printed if line and not line.startswith(("Ours:", "Rows carried"))]

    carried = render_lines(again)
    assert body(carried) == body(lines) and sum(line.startswith("Rows carried") for line in carried) == 1


def test_the_benchmarks_share_dragin_table2s_runs_and_show_its_cells(tmp_path):
    reproduce(request(tmp_path, "dragin-table2", datasets=["hotpotqa"], rows=["dragin"]),
              method_factory=method_factory(answers()), progress=False)
    files = fx.write_all(tmp_path)
    built: list = []
    req = request(tmp_path, TABLE, data={"hotpotqa": files["hotpotqa"], "2wikimultihopqa": files["2wikimultihopqa"]},
                  rows=["dragin", "flare", "seakr"])
    report = reproduce(req, method_factory=method_factory(answers(), built=built), progress=False)
    ran = [(c["dataset"], c["method"]) for c, _, _ in built]
    assert ("hotpotqa", "dragin") not in ran  # Table 2's run, resumed finished
    assert ran == [("hotpotqa", "flare"), ("hotpotqa", "seakr"),
                   ("2wikimultihopqa", "flare"), ("2wikimultihopqa", "dragin"), ("2wikimultihopqa", "seakr")]
    assert {c["scorer"] for c, _, _ in built} == {"dragin"}
    lines = render_lines(report)
    text = "\n".join(lines)
    # the fake answers h1 right and h2 wrong, retrieving once each: ours beside Table 2's and Table 3's
    assert ("| DRAGIN (reference variant) | 0.500 | 0.337 | +0.163 | 0.500 | 0.442 | +0.058 | 1.00 | 3.50 | -2.50 |"
            in text)
    assert ("- hotpotqa: SeaKR answers more than DRAGIN (reference variant) (SeaKR's claim): EM 0.500 vs 0.500; "
            "McNemar (exact), n 2, p 1.000: **undetermined**.") in text
    record = table_record(report, lines, RunContext("dynrag reproduce dynamic-family", 1.0, None, None))
    assert record.published_group == "Llama2-13b-chat"
    cells = paper_cells(TABLE, "Llama2-13b-chat")
    assert record.published == {ds: {k: cells[ds][k] for k in ("dragin", "flare")}
                                for ds in ("hotpotqa", "2wikimultihopqa")}


@pytest.mark.slow  # trains or tunes end to end: the full suite's, not the quick loop's
def test_a_tune_runs_the_rows_of_its_method_at_its_best_values(tmp_path):
    tuned = tune_dir(tmp_path, "reference")
    built: list = []
    report = reproduce(request(tmp_path, TABLE, data={"hotpotqa": fx.write_all(tmp_path)["hotpotqa"]},
                               datasets=["hotpotqa"], rows=["dragin", "dragin_paper"], tuned=[tuned]),
                       method_factory=method_factory(answers(), built=built), progress=False)
    thetas = {c["options"]["variant"]: c["options"]["theta"] for c, _, _ in built}
    assert thetas["reference"] == 1.4 and thetas["paper"] != 1.4  # the tune held variant=reference
    text = render(report)
    assert f"Tuned: dragin at theta=1.4 (from {tuned}, trial" in text
    assert "| DRAGIN (reference variant) (tuned theta=1.4) |" in text and "| DRAGIN (paper variant) |" in text

