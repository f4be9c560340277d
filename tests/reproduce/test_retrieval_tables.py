"""Retrieval-only paper tables: the coverage scoring against hand-worked values, and a table run end
to end on a tiny HotpotQA file with real bm25s indexes (resumed, documents chunked, bad input)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dynrag.errors import ConfigError
from dynrag.reproduce.catalog import RETRIEVAL_TABLES, TABLES, table_names
from dynrag.reproduce.cli import TABLE_HELP
from dynrag.reproduce.retrieval_render import render_retrieval
from dynrag.reproduce.retrieval_runs import reproduce_retrieval
from dynrag.reproduce.retrieval_tables import (
    CorpusShape, Metric, RetrievalRow, RetrievalTable, chunk_span, covered_within, first_cover_ranks, ranking_scores,
)
from dynrag.reproduce.runs import ReproduceRequest
from dynrag.reproduce.tables import published
from tests.eval import fixtures as fx


# ---- scoring ------------------------------------------------------------------------------------


def test_a_chunk_covers_a_paragraph_when_half_of_its_words_are_inside():
    parts = {"a": (0, 10), "b": (10, 20), "c": (20, 24)}
    assert covered_within((0, 15), parts) == {"a", "b"}  # b: 5 of 10 words inside, exactly half
    assert covered_within((6, 14), parts) == set()  # a 4/10, b 4/10
    assert covered_within((18, 30), parts) == {"c"}


def test_chunk_span_follows_the_windows_of_chunk_by_tokens():
    from dynrag.corpus.passage import Passage
    from dynrag.text.chunking import chunk_by_tokens

    document = Passage("doc-1", "t", " ".join(f"w{i}" for i in range(23)))
    for chunk in chunk_by_tokens(document, 10, 3):
        doc, (start, end) = chunk_span(chunk.id, 23, 10, 3)
        assert doc == "doc-1" and chunk.text.split() == [f"w{i}" for i in range(start, end)]
    assert chunk_span("doc-2", 7, 10, 3) == ("doc-2", (0, 7))  # fits in one chunk: keeps its id


def test_ranking_scores_match_hand_computed_values():
    # gold a first covered at rank 2, b at rank 3 (rank 1 covers nothing), c never
    covers = [set(), {"a", "x"}, {"b"}, {"a"}]
    assert first_cover_ranks(covers, ["a", "b", "c"]) == {"a": 2, "b": 3}
    scores = ranking_scores(covers, ["a", "b", "c"], [5, 6, 7, 8], ["r@1", "r@3", "mrr@1", "mrr@10", "ndcg@2", "map", "words@2"])
    assert scores["r@1"] == 0 and scores["r@3"] == pytest.approx(2 / 3)
    assert scores["mrr@1"] == 0 and scores["mrr@10"] == pytest.approx(0.5)
    assert scores["ndcg@2"] == pytest.approx((1 / 1.58496) / (1 + 1 / 1.58496), abs=1e-5)
    assert scores["map"] == pytest.approx((1 / 2 + 2 / 3) / 3)
    assert scores["words@2"] == 11
    with pytest.raises(ValueError):
        ranking_scores(covers, ["a"], [1] * 4, ["bogus@3"])


# ---- registry and help -----------------------------------------------------------------------------


def test_help_lists_every_table_and_each_names_a_published_source():
    for name in table_names():
        assert name in TABLE_HELP
    for name in RETRIEVAL_TABLES.names():
        table = RETRIEVAL_TABLES.open(name, {})
        assert table.source and table.stand_in and table.rows
        assert name in published()["tables"] and table.published, name  # the paper's cells are typed
        keys, ours = {r.key for r in table.rows}, {m.key for m in table.ours()}
        for claim in table.claims:  # every claim compares two rows of the table on one of our metrics
            assert {claim.better, claim.worse} <= keys and claim.metric in ours, (name, claim)
        metrics = {m.paper for m in table.metrics if m.paper}
        for rows in table.published.values():
            for cells in rows.values():
                assert set(cells) & metrics, (name, cells)
    assert not set(RETRIEVAL_TABLES.names()) & set(TABLES.names())


# ---- a table end to end -------------------------------------------------------------------------


def tiny_table(rows: list[RetrievalRow]) -> RetrievalTable:
    return RetrievalTable(
        "tiny", "A tiny table", ["hotpotqa"], rows,
        [Metric("R@1", "r@1", "r@1"), Metric("MRR@10", "mrr@10"), Metric("words in top 1", "words@1", None, 1.0, 0)],
        {"paperset": {"bm25": {"r@1": 12.5}}}, "their data", "our tiny file", "a test",
    )


def run(tmp_path: Path, table: RetrievalTable, **kw):
    from rich.console import Console

    files = fx.write_all(tmp_path)
    req = ReproduceRequest(table="tiny", data={"hotpotqa": files["hotpotqa"]}, out=tmp_path / "out", **kw)
    return reproduce_retrieval(table, req, Console(stderr=True, quiet=True), progress=False)


def test_paragraph_rows_score_their_rankings_and_a_rerun_reads_them_back(tmp_path):
    table = tiny_table([RetrievalRow("bm25", "BM25", "bm25")])
    report = run(tmp_path, table)
    summary = report["results"][("hotpotqa", "bm25")]
    assert summary["n"] == 2
    # h1's gold is two paragraphs, h2's one; every gold paragraph of this 4-paragraph pool is found
    assert summary["table_scores"]["r@1"] > 0 and summary["table_scores"]["mrr@10"] == 1.0
    row_dir = next((tmp_path / "out" / "retrieval" / "tiny" / "hotpotqa" / "nall").glob("*/bm25-*"))
    stamp = (row_dir / "summary.json").stat().st_mtime_ns
    again = run(tmp_path, table)
    assert again["results"][("hotpotqa", "bm25")]["table_scores"] == summary["table_scores"]
    assert (row_dir / "summary.json").stat().st_mtime_ns == stamp  # read back, not rerun
    text = render_retrieval(again)
    assert "| BM25 |" in text and "Published (paperset)" in text and "12.50" in text and "Cost of this command" in text


def test_documents_are_chunked_and_chunks_credit_the_paragraphs_inside_them(tmp_path):
    rows = [RetrievalRow("whole", "one chunk a document", "bm25", corpus=CorpusShape("tokens:2048:0", documents=True)),
            RetrievalRow("small", "4-word chunks", "bm25", corpus=CorpusShape("tokens:4:1", documents=True))]
    report = run(tmp_path, tiny_table(rows), limit=1)
    whole = report["results"][("hotpotqa", "whole")]["table_scores"]
    small = report["results"][("hotpotqa", "small")]["table_scores"]
    assert whole["r@1"] == 1.0  # the question's own document holds both gold paragraphs
    assert small["r@1"] < 1.0 and 0 < small["words@1"] <= 4 and whole["words@1"] > small["words@1"]
    corpus = json.loads(next((tmp_path / "out" / "retrieval" / "corpora" / "hotpotqa").glob("*/docs_tokens-4-1_default/corpus.json")).read_text())
    assert corpus["documents"] and set(corpus["spans"]) == {"doc-h1", "doc-h2"}


def test_an_unknown_row_names_the_rows(tmp_path):
    with pytest.raises(ConfigError, match="has rows bm25"):
        run(tmp_path, tiny_table([RetrievalRow("bm25", "BM25", "bm25")]), rows=["nope"])


@pytest.mark.slow  # loads the real sentence embedder and reranks with it: seconds of CPU
def test_a_reranking_row_reorders_its_first_stage_and_resumes_without_ranking_a_question_twice(tmp_path):
    rows = [RetrievalRow("bm25", "BM25", "bm25"),
            RetrievalRow("embedding", "embedding reranker", "bm25", rerank="embedding", first_stage="bm25", candidates=3)]
    table = tiny_table(rows)
    report = run(tmp_path, table, rows=["embedding"])  # its first stage runs too
    assert set(report["results"]) == {("hotpotqa", "bm25"), ("hotpotqa", "embedding")}
    reranked = report["results"][("hotpotqa", "embedding")]
    assert reranked["reranker"] == "embedding" and reranked["n"] == 2
    row_dir = next((tmp_path / "out" / "retrieval" / "tiny" / "hotpotqa" / "nall").glob("*/embedding-*"))
    lines = (row_dir / "rankings.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all(len(json.loads(line)["ranked"]) <= 3 for line in lines)
    # killed after the first question: its ranking stays, the second is made once
    (row_dir / "summary.json").unlink()
    (row_dir / "rankings.jsonl").write_text(lines[0] + "\n" + lines[1][:10])
    again = run(tmp_path, table, rows=["embedding"])
    ids = [json.loads(line)["id"] for line in (row_dir / "rankings.jsonl").read_text().splitlines()]
    assert sorted(ids) == ["h1", "h2"]
    assert again["results"][("hotpotqa", "embedding")]["table_scores"] == reranked["table_scores"]


@pytest.mark.slow
def test_with_reader_true_the_bundled_reader_answers_from_each_rows_chunks(tmp_path):
    from dataclasses import replace

    rows = [RetrievalRow("whole", "one chunk a document", "bm25", corpus=CorpusShape("tokens:2048:0", documents=True))]
    table = replace(tiny_table(rows), reads=True,
                    metrics=[Metric("R@1", "r@1"), Metric("EM", "em", reader=True), Metric("F1", "f1", reader=True)])
    report = run(tmp_path, table, limit=1, model="bundled:smollm2", options={"reader": "true", "reader_k": "1"})
    scores = report["results"][("hotpotqa", "whole")]["table_scores"]
    assert scores["r@1"] == 1.0 and 0.0 <= scores["f1"] <= 1.0 and "em" in scores
    reader_dir = next((tmp_path / "out" / "retrieval" / "tiny").rglob("reader"))
    config = json.loads((reader_dir / "config.json").read_text())
    assert config["method"] == "single" and config["options"]["k"] == 1
    assert "| row | R@1 | EM | F1 |" in render_retrieval(report)


# ---- claims --------------------------------------------------------------------------------------


def test_a_claim_holds_fails_or_stays_undetermined_by_the_paired_test():
    from dynrag.reproduce.claims import Claim, decide, paired_permutation_p

    claim = Claim("a beats b", "a", "b", "mrr@10")
    ahead = {f"q{i}": 1.0 for i in range(12)}
    behind = {f"q{i}": 0.0 for i in range(12)}
    # twelve differences of +1: only the all-positive sign pattern (and its mirror) is as extreme: p = 2/4096
    assert paired_permutation_p([1.0] * 12, [0.0] * 12) == pytest.approx(2 / 4096, rel=0.15)
    assert paired_permutation_p([1.0], [0.0]) == 1.0  # one pair tells nothing (scipy refuses it)
    assert decide(claim, ahead, behind).verdict == "holds"
    assert decide(claim, behind, ahead).verdict == "does not hold"
    mixed = {f"q{i}": float(i % 2) for i in range(12)}
    verdict = decide(claim, mixed, {q: 1.0 - v for q, v in mixed.items()})
    assert verdict.verdict == "undetermined" and verdict.difference == 0.0 and verdict.n == 12
    assert decide(claim, {"q1": 1.0}, {"q1": 1.0}).p == 1.0  # nothing differs


def test_the_rendered_table_decides_its_claims_on_the_questions_both_rows_answered(tmp_path):
    from dataclasses import replace

    from dynrag.reproduce.claims import Claim

    rows = [RetrievalRow("whole", "whole documents", "bm25", corpus=CorpusShape("tokens:2048:0", documents=True)),
            RetrievalRow("small", "4-word chunks", "bm25", corpus=CorpusShape("tokens:4:1", documents=True))]
    table = replace(tiny_table(rows), claims=[Claim("whole documents find more", "whole", "small", "r@1")])
    text = render_retrieval(run(tmp_path, table))
    assert "Claims (the paper's, tested on these questions):" in text
    assert "whole documents find more: whole documents − 4-word chunks on r@1 = +" in text and "n = 2" in text
    assert "**undetermined**" in text  # two questions cannot show anything at p < 0.05


def test_a_table_with_a_default_limit_asks_that_many_questions_unless_told_otherwise(tmp_path):
    from dataclasses import replace

    table = replace(tiny_table([RetrievalRow("bm25", "BM25", "bm25")]), default_limit=1)
    assert run(tmp_path, table)["results"][("hotpotqa", "bm25")]["n"] == 1
    assert run(tmp_path, table, limit=2)["results"][("hotpotqa", "bm25")]["n"] == 2
    for name in ("bestpractice-table6", "bestpractice-table7", "bestpractice-table9"):  # the model writes per question
        assert RETRIEVAL_TABLES.open(name, {}).default_limit
