"""A benchmark's systems record (``reproduce/systems_record.py``): built from figures and the command
line, with the provenance filled in, it loads back through the strict model; and the benchmark
scripts' ``--record DIR`` writes one with their headline figures. The scripts' measuring parts are
replaced by fixed results, so nothing here times anything."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import math
import sys
from pathlib import Path

import pytest

from dynrag.io.files import file_sha256
from dynrag.lm.bundled import resolve_bundled
from dynrag.reproduce.provenance import git_commit, today
from dynrag.reproduce.records import Figure, load_record
from dynrag.reproduce.systems_record import Started, systems_id, systems_record, write_systems_record

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def script(name: str):
    """A benchmark script imported as a module (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"bench_under_test_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def only_record(directory: Path):
    (path,) = directory.glob("*.json")
    return load_record(path)


def test_the_record_loads_back_with_its_provenance_filled(tmp_path):
    data = tmp_path / "questions.json"
    data.write_text("[]")
    path = write_systems_record(
        tmp_path / "results", systems_id("bench-x", "bundled:qwen2.5-0.5b", "n10"), "A title",
        [("speed ratio", 1.5, "x", "3 s against 2 s"), ("peak RSS", 2048, "MB"),
         Figure(name="share", value=0.9, unit="share"), ("not fitted", math.nan, "exponent")],
        started=Started.now(), argv=["benchmarks/bench_x.py", "--limit", "10"], models=["bundled"], data=[data],
        corpus="contexts", datasets=["hotpotqa"])
    record = load_record(path)
    assert record.id == path.stem and record.id.startswith("systems.bench-x.")
    assert record.kind == "systems" and record.table == "bench_x" and record.title == "A title"
    assert [(f.name, f.value, f.unit, f.note) for f in record.figures] == [
        ("speed ratio", 1.5, "x", "3 s against 2 s"), ("peak RSS", 2048.0, "MB", None), ("share", 0.9, "share", None)]
    p = record.provenance
    assert p.commit == git_commit()
    assert p.command.endswith("benchmarks/bench_x.py --limit 10")
    default = resolve_bundled("default")
    assert p.model == record.reader == f"bundled:{default.name}"
    assert p.model_sha256 == default.sha256
    assert p.data == str(data) and p.data_sha256 == file_sha256(data)
    assert p.corpus == "contexts" and record.datasets == ["hotpotqa"]
    assert p.load and p.machine and p.wall_s is not None and p.wall_s >= 0
    assert p.date == today() and p.imported_from is None


def test_several_models_name_no_single_reader_and_an_unhashed_one_is_a_dash():
    record = systems_record("bench-y", "t", [("f", 1, "x")], started=Started.now(), argv=["bench_y.py"],
                            models=["bundled:qwen2.5-0.5b", "hf:/some/dir"])
    assert record.id == "systems.bench-y" and record.reader is None
    assert record.provenance.model == "bundled:qwen2.5-0.5b, hf:/some/dir"
    assert record.provenance.model_sha256 == f"{resolve_bundled('qwen2.5-0.5b').sha256}, -"


def test_no_figure_no_record(tmp_path):
    assert write_systems_record(tmp_path, "systems.empty", "t", [("nan", math.nan, "x")], started=Started.now(),
                                argv=["b.py"]) is None
    assert not list(tmp_path.iterdir())


# ---- the scripts -------------------------------------------------------------------------------


def run_bench_bm25(tmp_path: Path, monkeypatch, *extra: str) -> tuple[Path, Path, str]:
    """bench_bm25.py's main on a small corpus, its builds and searches replaced by fixed results;
    returns the corpus, the questions and what it printed."""
    bench = script("bench_bm25")
    corpus = tmp_path / "wiki" / "passages.jsonl"
    corpus.parent.mkdir()
    corpus.write_text("".join(json.dumps({"id": str(i), "title": "t", "text": f"word {i}"}) + "\n" for i in range(8)))
    questions = tmp_path / "questions.json"
    questions.write_text(json.dumps([{"question": "which word?"}]))

    def child(args):  # one build: the full corpus, its half or raw bm25s
        n = int(args[1])
        return {"passages": n, "seconds": 0.5, "cpu_seconds": 0.4, "peak_growth_mb": 2.0 * n, "baseline_mb": 90.0}

    variants = {bench.HITS: (900.0, 1000.0), bench.ROWS: (950.0, 1050.0), bench.READ: (400.0, 500.0),
                bench.RAW: (1000.0, 1100.0), "raw bm25s +docs RAM": (700.0, 800.0),
                "raw bm25s +docs mmap": (800.0, 1000.0)}
    monkeypatch.setattr(bench, "run_child", child)
    monkeypatch.setattr(bench, "bench_search", lambda *a: {
        "qps": {**variants, "rank_bm25 BM25Okapi": (1.0, 2.0)}, "backend": "numpy", "same_ranking": 9, "n": 10})
    monkeypatch.setattr(bench, "bench_scaled", lambda *a: {"qps": variants, "passages": 40})
    monkeypatch.setattr(sys, "argv", ["benchmarks/bench_bm25.py", str(corpus), "--questions", str(questions),
                                      "--build-repeats", "1", *extra])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        bench.main()
    return corpus, questions, out.getvalue()


def test_bench_bm25_record_holds_its_ingest_rates_and_speed_ratios(tmp_path, monkeypatch):
    corpus, questions, printed = run_bench_bm25(tmp_path, monkeypatch, "--record", str(tmp_path / "results"))
    assert "## BM25 search and ingest" in printed
    record = only_record(tmp_path / "results")
    assert record.id == "systems.bench-bm25.wiki-passages.jsonl" and record.table == "bench_bm25"
    figures = {f.name: f for f in record.figures}
    assert list(figures) == [
        "ingest rate, full corpus (CPU time)", "ingest peak RSS growth, full corpus", "search_batch throughput (wall)",
        "search_batch ÷ raw bm25s ids (CPU)", "search_rows_batch ÷ raw bm25s ids (CPU)",
        "search_batch ÷ raw bm25s with documents from mmap (CPU)", "search_batch ÷ rank_bm25 BM25Okapi (CPU)",
        "same top-k ranking as raw bm25s", "search_batch throughput, repeated corpus (wall)",
        "search_batch ÷ raw bm25s ids, repeated corpus (CPU)",
        "search_rows_batch ÷ raw bm25s ids, repeated corpus (CPU)"]
    assert figures["ingest rate, full corpus (CPU time)"].value == 8 / 0.4
    assert figures["search_batch ÷ rank_bm25 BM25Okapi (CPU)"].value == 500.0
    assert figures["same top-k ranking as raw bm25s"].value == 0.9
    assert record.provenance.data_sha256 == f"{file_sha256(corpus)}, {file_sha256(questions)}"


def test_without_record_bench_bm25_writes_nothing(tmp_path, monkeypatch):
    run_bench_bm25(tmp_path, monkeypatch)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["passages.jsonl", "questions.json", "wiki"]


def scale_row(size: int) -> dict:
    return {"size": size, "passages": size, "seconds": size / 10_000, "cpu": size / 12_000,
            "peak_rss_mb": 100 + size / 5_000, "disk_bytes": size * 300, "store_bytes": size * 200,
            "matrix_bytes": size * 100, "search_qps_numpy_k3": 50.0, "search_qps_numpy_k10": 40.0,
            "search_qps_numba_k3": 120.0, "search_qps_numba_k10": 100.0 - size / 100_000,
            "search_peak_rss_mb": 80 + size / 10_000}


def test_bench_scale_merge_records_per_size_figures_and_the_fits(tmp_path, monkeypatch, capsys):
    bench = script("bench_scale")
    runs = tmp_path / "step1.json"
    runs.write_text(json.dumps({"bm25": [scale_row(100_000), scale_row(1_000_000)], "dense": None,
                                "opensearch": None}))
    monkeypatch.setattr(sys, "argv", ["benchmarks/bench_scale.py", "--merge", str(runs),
                                      "--record", str(tmp_path / "results")])
    bench.main()
    assert "### bm25s" in capsys.readouterr().out  # the report is printed as before

    record = only_record(tmp_path / "results")
    assert record.id == "systems.bench-scale.merged.100000-1000000"
    names = [f.name for f in record.figures]
    assert "bm25 ingest rate at 1,000,000 passages (CPU)" in names
    assert "bm25 search at 100,000 passages, k 10, numba" in names
    for label, *_ in bench.FITTED:
        assert f"bm25 {label} growth exponent" in names
        assert f"bm25 {label} at 21M, power law" in names
    exponent = next(f for f in record.figures if f.name == "bm25 index on disk growth exponent")
    assert exponent.value == pytest.approx(1.0)  # disk grows with the passages, as the rows say


def test_bench_reader_names_em_and_f1_by_setting_and_model():
    bench = script("bench_reader")
    rows = [{"spec": "bundled:qwen2.5-0.5b", "style": "chat", "answer": "reasoned", "reasoning": "chain",
             "exemplars": 6, "setting": setting, "n": 10, "em": em, "f1": em + 0.1, "s_per_q": 2.0,
             "peak_rss_mib": 900.0} for setting, em in (("gold", 0.4), ("closed-book", 0.2))]
    figures = {name: (value, unit) for name, value, unit, _ in bench.figures(rows)}
    assert figures["EM, gold paragraphs, bundled:qwen2.5-0.5b"] == (0.4, "EM")
    assert figures["F1, closed book, bundled:qwen2.5-0.5b"] == (pytest.approx(0.3), "F1")
    assert figures["peak RSS, bundled:qwen2.5-0.5b"] == (900.0, "MiB")
    assert len(figures) == len(bench.figures(rows))  # every name once


@pytest.mark.slow  # the script imports the model stack (seconds)
def test_bench_dragin_backends_figures_name_ratios_and_agreements(capsys):
    bench = script("bench_dragin_backends")
    names = ["transformers", "hybrid", "llama.cpp", "flare on llama.cpp"]

    def answer(seconds, final):
        return {"seconds": seconds, "tokens": 10, "final": final, "queries": ["q"], "retrievals": 1}

    rows = [{"variant": "paper", "id": str(i), "transformers": answer(3.0, "a"), "hybrid": answer(4.0, "a"),
             "llama.cpp": answer(2.0, "a" if i else "b"), "flare on llama.cpp": answer(1.0, "a")} for i in range(4)]
    figures = {name: value for name, value, *_ in bench.report("paper", "bundled:qwen2.5-0.5b", rows, names)}
    assert figures["paper variant s/question, transformers ÷ llama.cpp"] == 1.5
    assert figures["paper variant s/question, hybrid ÷ llama.cpp"] == 2.0
    assert figures["paper variant time a generated token, dragin ÷ flare, both on llama.cpp"] == 2.0
    assert figures["paper variant llama.cpp vs transformers: identical final answers"] == 0.75
    assert figures["paper variant hybrid vs transformers: same decision to retrieve at all"] == 1.0
    assert "3/4" in capsys.readouterr().out  # still printed as before
