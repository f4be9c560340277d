"""Every query transform through evaluate_retrieval and `dynrag eval-retrieval --query-transform`,
with scripted models standing in for the bundled one."""

import json

import pytest
from typer.testing import CliRunner

from dynrag.cli import app
from dynrag.config import load_run_config
from dynrag.datasets.loaders import QAExample
from dynrag.corpus import Passage
from dynrag.errors import DynragError
from dynrag.eval.retrieval import evaluate_retrieval
from dynrag.retrieval.hyde_cache import QueryTexts
from dynrag.retrieval.query_transforms import QueryTransformer
from dynrag.run.plan import make_plan
from tests.eval import fixtures as fx
from tests.fakes import FakeRetriever, ScriptedLM
from tests.retrieval.test_query_transforms import SamplingLM, reply

Q = "Which river flows through the town where the Velmora bridge stands?"
PASSAGE = "The Velmora bridge stands in Lyon on the Rhone."
SUB = ["Where does the Velmora bridge stand?", "Which river flows through Lyon?"]


def ex(qid, question, supporting):
    return QAExample(qid, question, ["a"], [Passage(p, p, "text") for p in supporting], list(supporting))


@pytest.mark.parametrize("name, searched, ranked", [
    ("hyde", f"{Q} {PASSAGE}", ["g1", "x"]),
    ("hyde-only", PASSAGE, ["x", "g1"]),
    ("rewrite", "Velmora bridge town river", ["g2", "g1"]),
])
def test_one_text_transforms_search_what_they_write(name, searched, ranked):
    retriever = FakeRetriever(rankings={searched: ranked})
    transformer = QueryTransformer(name, QueryTexts(ScriptedLM(reply)))
    result = evaluate_retrieval(retriever, [ex("1", Q, ["g1"])], ks=[1, 2], query_transform=transformer.queries)
    assert result.rankings[0] == {"id": "1", "gold": ["g1"], "ranked": ranked, "queries": [searched]}
    assert retriever.queries == [searched, searched]  # warm-up, then the search
    assert result.summary["recall@2"] == 1.0


def test_hyde_multi_searches_the_question_and_every_passage_as_one_text():
    transformer = QueryTransformer("hyde-multi", QueryTexts(SamplingLM()), hyde_documents=2)
    query = transformer.queries([Q])[0]
    assert query.startswith(f"{Q} {PASSAGE} drawn passage")
    retriever = FakeRetriever(rankings={query: ["g1"]})
    result = evaluate_retrieval(retriever, [ex("1", Q, ["g1"])], ks=[1], query_transform=transformer.queries)
    assert result.summary["mrr"] == 1.0 and result.rankings[0]["queries"] == [query]


def test_decompose_searches_each_sub_question_and_fuses_their_rankings():
    # sub 1: [a, g1], sub 2: [g2, a] -> a = 1/61 + 1/62, then g2 = 1/61 (best rank 1), then g1 = 1/62
    retriever = FakeRetriever(rankings={SUB[0]: ["a", "g1"], SUB[1]: ["g2", "a"], "plain": ["g3"]})
    transformer = QueryTransformer("decompose", QueryTexts(ScriptedLM(reply)))
    examples = [ex("1", Q, ["g1", "g2"]), ex("2", "plain", ["g3"])]

    def transform(questions):  # one question keeps a single query: its ranking as it comes
        return [q if q == "plain" else transformer.query(q) for q in questions]

    result = evaluate_retrieval(retriever, examples, ks=[2, 3], batch_size=2, query_transform=transform)
    assert result.rankings[0] == {"id": "1", "gold": ["g1", "g2"], "ranked": ["a", "g2", "g1"], "queries": SUB}
    assert result.rankings[1]["ranked"] == ["g3"]
    assert result.summary["recall@2"] == pytest.approx((0.5 + 1) / 2)
    assert result.summary["support_all@3"] == 1.0
    assert retriever.queries == [*SUB, *SUB, "plain"]  # warm-up, then the batch in one call
    with pytest.raises(DynragError, match="empty or non-text list"):
        evaluate_retrieval(retriever, examples, ks=[1], query_transform=lambda qs: [[] for _ in qs])


# ---- the command --------------------------------------------------------------------------------------


def run(args):
    return CliRunner().invoke(app, ["eval-retrieval", *args])


@pytest.fixture
def scripted(monkeypatch):
    import dynrag.lm

    lm = ScriptedLM(reply)
    monkeypatch.setattr(dynrag.lm, "load_lm", lambda spec, progress=True: lm)
    return lm


def test_eval_retrieval_decompose_records_its_texts_and_reuses_them(tmp_path, scripted):
    data = fx.write_json(tmp_path / "hotpot.json", fx.HOTPOT)
    common = ["--dataset", "hotpotqa", "--data", str(data), "--cutoffs", "1,2", "--retriever-option", "backend=numpy",
              "--query-transform", "decompose"]
    r = run([*common, "--out", str(tmp_path / "first")])
    assert r.exit_code == 0, r.output
    first = json.loads((tmp_path / "first" / "summary.json").read_text())
    cache = tmp_path / "first" / "query-texts.jsonl"
    assert first["query_transform"] == "decompose" and first["query_cache"] == str(cache.resolve())
    assert (first["texts_generated"], first["texts_reused"]) == (2, 0) and first["query_model"] == "scripted"
    assert first["generation_seconds"] >= 0 and first["fusion"] == "rrf (k=60)"
    assert first["query_prompt_style"] == "plain" and "query decomposition" in r.stdout
    rankings = [json.loads(line) for line in (tmp_path / "first" / "rankings.jsonl").read_text().splitlines()]
    assert rankings[0]["queries"] == SUB
    config = json.loads((tmp_path / "first" / "config.json").read_text())
    assert config["query_transform"] == "decompose" and config["hyde"] is False
    # a rerun sharing the file writes nothing
    r = run([*common, "--out", str(tmp_path / "second"), "--hyde-cache", str(cache)])
    assert r.exit_code == 0, r.output
    second = json.loads((tmp_path / "second" / "summary.json").read_text())
    assert (second["texts_generated"], second["texts_reused"]) == (0, 2)
    assert second["generation_seconds"] == first["generation_seconds"]


def test_eval_retrieval_hyde_multi_shares_its_first_passage_with_hyde(tmp_path, monkeypatch):
    """A real (tiny) model draws the extra passages; --hyde afterwards reads the greedy ones back."""
    import dynrag.lm
    from tests.tiny_models import tiny_llama_lm

    tiny = tiny_llama_lm(seed=1)
    monkeypatch.setattr(dynrag.lm, "load_lm", lambda spec, progress=True: tiny)
    data = fx.write_json(tmp_path / "hotpot.json", fx.HOTPOT)
    cache = tmp_path / "texts.jsonl"
    common = ["--dataset", "hotpotqa", "--data", str(data), "--cutoffs", "1,2", "--retriever-option", "backend=numpy",
              "--hyde-max-new-tokens", "4", "--hyde-cache", str(cache)]
    r = run([*common, "--query-transform", "hyde-multi", "--hyde-documents", "2", "--out", str(tmp_path / "multi")])
    assert r.exit_code == 0, r.output
    multi = json.loads((tmp_path / "multi" / "summary.json").read_text())
    assert multi["hyde_documents"] == 2 and (multi["texts_generated"], multi["texts_reused"]) == (4, 0)
    assert "HyDE (2 passages)" in r.stdout
    r = run([*common, "--hyde", "--out", str(tmp_path / "hyde")])
    assert r.exit_code == 0, r.output
    hyde = json.loads((tmp_path / "hyde" / "summary.json").read_text())
    assert hyde["query_transform"] == "hyde" and (hyde["hyde_generated"], hyde["hyde_reused"]) == (0, 2)
    # the same drawn passages on a second hyde-multi run into a fresh file
    r = run([*common[:-1], str(tmp_path / "fresh.jsonl"), "--query-transform", "hyde-multi", "--hyde-documents", "2",
             "--out", str(tmp_path / "again")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "again" / "rankings.jsonl").read_text() == (tmp_path / "multi" / "rankings.jsonl").read_text()


def test_eval_retrieval_transform_errors_are_one_line(tmp_path, scripted):
    data = fx.write_json(tmp_path / "hotpot.json", fx.HOTPOT)
    cases = [
        (["--query-transform", "hyd"], "--query-transform: unknown query transform; choose one of: "
                                       "none, hyde, hyde-only, hyde-multi, rewrite, decompose"),
        (["--query-transform", "hyde-multi", "--hyde-documents", "0"], "--hyde-documents: must be at least 1 (got 0)"),
        (["--hyde", "--query-transform", "rewrite"], "conflicts with --query-transform rewrite"),
        (["--model", "bundled"], "add --hyde or --query-transform NAME"),
        (["--query-transform", "hyde-multi"], "cannot do; use a local model"),  # the scripted model cannot sample
    ]
    for extra, message in cases:
        r = run(["--dataset", "hotpotqa", "--data", str(data), "--out", str(tmp_path / "o"), *extra])
        assert r.exit_code == 1, (extra, r.output)
        assert message in r.output and "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1, r.output


def test_a_flags_dict_carries_the_transform_into_the_plan(tmp_path):
    data = fx.write_json(tmp_path / "hotpot.json", fx.HOTPOT)
    flags = dict(dataset="hotpotqa", data=data, out=tmp_path / "o", query_transform="hyde-multi", hyde_documents=2,
                 hyde_cache=tmp_path / "texts.jsonl")
    settings = make_plan(load_run_config(None, flags), command="eval-retrieval").retrieval_eval
    assert (settings.query_transform, settings.hyde_documents, settings.hyde) == ("hyde-multi", 2, False)
    legacy = make_plan(load_run_config(None, dict(flags, query_transform=None, hyde=True)), command="eval-retrieval")
    assert legacy.retrieval_eval.query_transform == "hyde" and legacy.retrieval_eval.hyde


@pytest.mark.slow  # the bundled model writes two questions' sub-questions (~20 s on a small CPU)
def test_eval_retrieval_decompose_with_the_bundled_model(tmp_path):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(3))
    r = run(["--dataset", "jsonl", "--data", str(data), "--query-transform", "decompose", "--limit", "2",
             "--model", "bundled:smollm2", "--retriever-option", "backend=numpy", "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["n"] == 2 and summary["texts_generated"] == 2 and summary["query_model"].startswith("bundled")
    for record in map(json.loads, (tmp_path / "o" / "rankings.jsonl").read_text().splitlines()):
        assert 1 <= len(record["queries"]) <= 3 and all(q.strip() for q in record["queries"])
        assert record["ranked"]
