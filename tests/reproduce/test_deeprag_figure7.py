"""DeepRAG's Figure 7: distributions of sub-question and retrieval counts, and the two readings tested."""

import json

import pytest

from dynrag.reproduce.catalog import open_table
from dynrag.reproduce.deeprag_figure7 import distribution, figure_lines, most_in


def test_distribution_folds_the_tail_into_the_last_column():
    assert distribution([0, 1, 1, 9]) == [0.25, 0.5, 0, 0, 0, 0, 0.25]
    assert distribution([]) == []


def test_most_in_is_a_binomial_test_against_a_half():
    inside, n, p, said = most_in([3, 4, 5, 3, 4, 5, 3, 4], 3, 5)
    assert (inside, n) == (8, 8) and p == pytest.approx(2 / 256) and said == "holds"
    assert most_in([1] * 8, 3, 5)[3] == "does not hold"
    assert most_in([3, 1], 3, 5)[3] == "undetermined"


def test_figure7_reads_table1s_deeprag_rows(tmp_path):
    table = open_table("deeprag-figure7")
    assert {r.key for r in table.runs} == {"cot", "deeprag_untrained"}
    spec = next(r for r in table.runs if r.dataset == "hotpotqa" and r.key == "deeprag_untrained")
    folder = tmp_path / "run"
    folder.mkdir()
    records = [{"id": i, "retrievals": 1, "decisions": [{"subquery": "q", "retrieve": True}] * 3} for i in range(4)]
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    lines = figure_lines([spec], {("hotpotqa", spec.key): {"run_dir": str(folder)}})
    assert "| sub-questions | 0.00 | 0.00 | 0.00 | 1.00 | 0.00 | 0.00 | 0.00 |" in lines
    assert any(t.startswith("- Most questions take 3-5 sub-questions: 4 of 4 (1.00)") for t in lines)
