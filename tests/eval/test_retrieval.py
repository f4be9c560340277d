"""Retrieval metrics by hand, the evaluation loop with a fake retriever, and `dynrag eval-retrieval`."""

import json

import pytest
from typer.testing import CliRunner

from dynrag.cli import app
from dynrag.corpus import Passage
from dynrag.errors import DynragError
from dynrag.datasets.loaders import QAExample
from dynrag.datasets.metrics import recall_at_k, reciprocal_rank, support_all_at_k
from dynrag.eval.retrieval import evaluate_retrieval
from tests.eval import fixtures as fx
from tests.fakes import FakeRetriever


def test_metrics_by_hand():
    ranked = ["x", "g1", "y", "g2", "z"]
    gold = ["g1", "g2"]
    assert recall_at_k(ranked, gold, 1) == 0.0
    assert recall_at_k(ranked, gold, 2) == 0.5
    assert recall_at_k(ranked, gold, 3) == 0.5
    assert recall_at_k(ranked, gold, 4) == 1.0
    assert recall_at_k(ranked, gold + ["g1"], 2) == 0.5  # gold ids count once
    assert recall_at_k(ranked, ["g1", "g2", "g3"], 10) == pytest.approx(2 / 3)
    assert support_all_at_k(ranked, gold, 3) == 0.0
    assert support_all_at_k(ranked, gold, 4) == 1.0
    assert reciprocal_rank(ranked, gold) == 0.5
    assert reciprocal_rank(["g2"], gold) == 1.0
    assert reciprocal_rank(["a", "b"], gold) == 0.0
    with pytest.raises(ValueError):
        recall_at_k(ranked, [], 3)
    with pytest.raises(ValueError):
        support_all_at_k(ranked, [], 3)


def ex(qid, question, supporting):
    return QAExample(qid, question, ["a"], [Passage(s, "", s) for s in supporting], list(supporting))


def test_evaluate_retrieval_by_hand():
    examples = [
        ex("1", "q1", ["g1", "g2"]),  # found at ranks 1 and 4
        ex("2", "q2", ["g3"]),  # found at rank 2
        ex("3", "q3", ["g4"]),  # not found
        ex("4", "q4", []),  # no gold: left out
    ]
    retriever = FakeRetriever(rankings={"q1": ["g1", "x", "y", "g2"], "q2": ["x", "g3"], "q3": ["x"]})
    result = evaluate_retrieval(retriever, examples, ks=[1, 3], batch_size=2)
    s = result.summary
    assert s["n"] == 3 and s["n_without_support"] == 1
    assert s["recall@1"] == pytest.approx((0.5 + 0 + 0) / 3)
    assert s["recall@3"] == pytest.approx((0.5 + 1 + 0) / 3)
    assert s["support_all@1"] == 0.0
    assert s["support_all@3"] == pytest.approx(1 / 3)
    assert s["mrr"] == pytest.approx((1 + 0.5 + 0) / 3) and s["mrr_depth"] == 3
    assert s["queries_per_second"] > 0
    assert result.rankings[0] == {"id": "1", "gold": ["g1", "g2"], "ranked": ["g1", "x", "y"]}
    assert retriever.queries == ["q1", "q1", "q2", "q3"]  # one warm-up query, then each once


def test_query_transform_hook():
    retriever = FakeRetriever(rankings={"q1 + passage": ["g1"]})
    seen = []

    def transform(questions):
        seen.append(list(questions))
        return [q + " + passage" for q in questions]

    result = evaluate_retrieval(retriever, [ex("1", "q1", ["g1"])], ks=[1], query_transform=transform)
    assert result.summary["recall@1"] == 1.0
    assert seen == [["q1"], ["q1"]]
    with pytest.raises(DynragError, match="returned 0 queries"):
        evaluate_retrieval(retriever, [ex("1", "q1", ["g1"])], ks=[1], query_transform=lambda qs: [])
    with pytest.raises(DynragError, match="no question has gold"):
        evaluate_retrieval(retriever, [ex("1", "q1", [])], ks=[1])


def run(args):
    return CliRunner().invoke(app, ["eval-retrieval", *args])


def test_eval_retrieval_cli_bm25(tmp_path):
    data = fx.write_json(tmp_path / "hotpot.json", fx.HOTPOT)
    common = ["--dataset", "hotpotqa", "--data", str(data), "--cutoffs", "1,2"]
    # numpy search: numba's JIT compile would cost seconds (tests/retrieval/test_bm25.py tests numba)
    r = run([*common, "--retriever", "bm25", "--retriever-option", "backend=numpy", "--out", str(tmp_path / "bm25")])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "bm25" / "summary.json").read_text())
    assert s["retriever"] == "bm25" and s["n"] == 2 and s["corpus"] == "contexts" and s["k"] == [1, 2]
    for key in ("recall@1", "recall@2", "support_all@1", "support_all@2", "mrr", "queries_per_second"):
        assert key in s and key in r.stdout
    assert 0 <= s["recall@2"] <= 1
    lines = (tmp_path / "bm25" / "rankings.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["h1", "h2"]


@pytest.mark.slow  # loads the embedding model twice (~10 s on a small CPU)
def test_eval_retrieval_cli_dense_then_hybrid(tmp_path):
    data = fx.write_json(tmp_path / "hotpot.json", fx.HOTPOT)
    common = ["--dataset", "hotpotqa", "--data", str(data), "--cutoffs", "1,2"]
    # dense builds the dense part inside the pooled index; hybrid then reuses it via --corpus DIR.
    r = run([*common, "--retriever", "dense", "--out", str(tmp_path / "dense")])
    assert r.exit_code == 0, r.output
    index_dir = tmp_path / "dense" / "contexts-index"
    assert (index_dir / "dense" / "vectors.npy").exists()
    r = run([*common, "--retriever", "hybrid", "--corpus", str(index_dir), "--retriever-option", "alpha=0.5",
             "--retriever-option", "fusion=rrf", "--out", str(tmp_path / "hybrid")])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "hybrid" / "summary.json").read_text())
    assert s["options"] == {"alpha": 0.5, "fusion": "rrf"} and s["index"] == str(index_dir.resolve())
    # "Is Lyon a city in France?" has one gold paragraph, which every retriever finds first.
    rankings = [json.loads(x) for x in (tmp_path / "hybrid" / "rankings.jsonl").read_text().splitlines()]
    assert rankings[1]["ranked"][0] == rankings[1]["gold"][0]


def test_eval_retrieval_cli_hyde_writes_passages_once_and_reuses_them(tmp_path, monkeypatch):
    """--hyde with a tiny model standing in for the bundled one: every question is searched with
    its passage, the passages land in the cache file, and a second run (another alpha of a sweep)
    reads them instead of generating."""
    import dynrag.lm
    from tests.tiny_models import tiny_llama_lm

    tiny = tiny_llama_lm(seed=1)
    monkeypatch.setattr(dynrag.lm, "load_lm", lambda spec, progress=True: tiny)
    data = fx.write_json(tmp_path / "hotpot.json", fx.HOTPOT)
    cache = tmp_path / "shared-hyde.jsonl"
    common = ["--dataset", "hotpotqa", "--data", str(data), "--cutoffs", "1,2", "--hyde", "--hyde-max-new-tokens", "5",
              "--retriever-option", "backend=numpy"]
    r = run([*common, "--out", str(tmp_path / "first"), "--hyde-cache", str(cache)])
    assert r.exit_code == 0, r.output
    first = json.loads((tmp_path / "first" / "summary.json").read_text())
    assert first["query_transform"] == "hyde" and first["hyde_model"] == tiny.name
    assert (first["hyde_generated"], first["hyde_reused"]) == (2, 0)
    assert first["hyde_generation_seconds"] > 0
    assert first["queries_per_second_with_generation"] < first["queries_per_second"]
    assert len(cache.read_text().splitlines()) == 2 and "HyDE" in r.stdout
    r = run([*common, "--out", str(tmp_path / "second"), "--hyde-cache", str(cache)])
    second = json.loads((tmp_path / "second" / "summary.json").read_text())
    assert (second["hyde_generated"], second["hyde_reused"]) == (0, 2)
    assert second["hyde_generation_seconds"] == first["hyde_generation_seconds"]
    assert (tmp_path / "first" / "rankings.jsonl").read_text() == (tmp_path / "second" / "rankings.jsonl").read_text()
    r = run(["--dataset", "hotpotqa", "--data", str(data), "--out", str(tmp_path / "x"), "--hyde-cache", str(cache)])
    assert r.exit_code == 1 and "add --hyde" in r.output


def test_eval_retrieval_cli_milvus(tmp_path):
    pytest.importorskip("milvus_lite")
    data = fx.write_jsonl(tmp_path / "m.jsonl", fx.MUSIQUE)
    r = run(["--dataset", "musique", "--data", str(data), "--retriever", "milvus", "--retriever-option", "mode=bm25",
             "--out", str(tmp_path / "mil")])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "mil" / "summary.json").read_text())
    assert s["recall@3"] == 1.0 and s["options"] == {"mode": "bm25"}
    assert (tmp_path / "mil" / "milvus.db").exists()


def test_eval_retrieval_cli_errors_are_one_line(tmp_path):
    data = fx.write_json(tmp_path / "hotpot.json", fx.HOTPOT)
    cases = [
        (["--retriever", "sparse"], "unknown retriever"),
        (["--retriever", "bm25", "--retriever-option", "alpha=1"],
         "--retriever-option alpha of retriever 'bm25': unknown option"),
        (["--retriever", "bm25", "--option", "alpha=1"], "--option alpha of retriever 'bm25': unknown option"),
        (["--cutoffs", "0"], "--cutoffs"),
        (["--corpus", str(tmp_path / "nope")], "no such index directory"),
        (["--limit", "0"], "--limit"),
    ]
    for extra, message in cases:
        r = run(["--dataset", "hotpotqa", "--data", str(data), "--out", str(tmp_path / "o"), *extra])
        assert r.exit_code == 1, (extra, r.output)
        assert message in r.output and "Traceback" not in r.output


def test_eval_retrieval_option_is_a_deprecated_alias_of_retriever_option(tmp_path):
    data = fx.write_json(tmp_path / "hotpot.json", fx.HOTPOT)
    r = run(["--dataset", "hotpotqa", "--data", str(data), "--option", "backend=numpy", "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    assert "warning: eval-retrieval --option is now --retriever-option" in r.output
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["options"] == {"backend": "numpy"}


def test_eval_retrieval_matches_gold_paragraphs_by_content_in_an_index_with_other_ids(tmp_path):
    """An index over the dataset's own paragraphs under other ids (as a Wikipedia dump gives them)
    scores the same recall as the pooled contexts; an index without them warns in one line."""
    from dynrag.datasets.loaders import load_examples

    data = fx.write_json(tmp_path / "hotpot.json", fx.HOTPOT)
    paragraphs = {p.id: p for ex in load_examples("hotpotqa", data) for p in ex.contexts}
    corpus = fx.write_jsonl(tmp_path / "wiki.jsonl", [
        {"id": f"wiki-{i}", "title": p.title, "text": p.text} for i, p in enumerate(paragraphs.values())])
    r = CliRunner().invoke(app, ["index", str(corpus), "--out", str(tmp_path / "idx")])
    assert r.exit_code == 0, r.output
    common = ["--dataset", "hotpotqa", "--data", str(data), "--cutoffs", "1,2", "--retriever-option", "backend=numpy"]
    pooled = run([*common, "--out", str(tmp_path / "pooled")])
    wiki = run([*common, "--corpus", str(tmp_path / "idx"), "--out", str(tmp_path / "wiki")])
    assert pooled.exit_code == 0 and wiki.exit_code == 0, (pooled.output, wiki.output)
    s_pooled, s_wiki = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("pooled", "wiki"))
    assert s_wiki["recall@2"] == s_pooled["recall@2"] > 0 and s_wiki["mrr"] == s_pooled["mrr"]
    assert s_wiki["gold_matched_by_content"] == 2 and s_pooled["gold_matched_by_content"] == 0
    rankings = [json.loads(x) for x in (tmp_path / "wiki" / "rankings.jsonl").read_text().splitlines()]
    assert all(hit.startswith("wiki-") for r in rankings for hit in r["ranked"])  # the index's own ids kept
    assert rankings[1]["ranked_as_gold"][0] == rankings[1]["gold"][0]
    assert "warning" not in wiki.output

    other = fx.write_jsonl(tmp_path / "other.jsonl", [{"id": "o1", "title": "Rome", "text": "Rome is in Italy."},
                                                      {"id": "o2", "title": "Oslo", "text": "Oslo is in Norway."}])
    assert CliRunner().invoke(app, ["index", str(other), "--out", str(tmp_path / "oidx")]).exit_code == 0
    r = run([*common, "--corpus", str(tmp_path / "oidx"), "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    assert "warning:" in r.output and "not one gold passage of the 2 questions" in r.output
    # A chunked index never holds a whole gold paragraph, so the warning would only be noise there.
    assert CliRunner().invoke(app, ["index", str(other), "--out", str(tmp_path / "cidx"),
                                    "--chunk", "tokens:3:1"]).exit_code == 0
    r = run([*common, "--corpus", str(tmp_path / "cidx"), "--out", str(tmp_path / "c")])
    assert r.exit_code == 0, r.output
    assert "warning" not in r.output
