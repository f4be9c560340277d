"""`single` with the best-practice chain: tiny model, real BM25 index, real embedder and classifier
(fast), and the balanced preset on the bundled model (slow)."""

import json

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
from typer.testing import CliRunner

from dynrag.context.repack import repack
from dynrag.corpus.passage import Passage
from dynrag.lm.hf import HFLanguageModel
from dynrag.methods.chain import PRESETS
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.registry import build_method, parse_options
from dynrag.rerank.embedding import EmbeddingReranker
from dynrag.retrieval.bm25 import BM25Index
from dynrag.retrieval.embedder import Embedder
from tests.tiny_models import WORDS, tiny_llama

QUESTION = "Who built the old bridge of the town?"
TEXTS = [
    ("Old bridge", "The old bridge of the town was built in 1887 by an engineer. It crosses the river."),
    ("River Rhone", "The river Rhone flows south through Lyon. It reaches the sea in the south."),
    ("Harbour museum", "The museum of the harbour town opened in the new year. The old bridge is near it."),
    ("School", "The founder of the school was born in Paris. The school is in the north of the town."),
    ("Mill", "The old mill of the town was built by the first engineer of the river. It is now a museum."),
    ("Paris", "Paris is a city on the Seine. It is the capital of France."),
]


def tokenizer_with_yes_no() -> PreTrainedTokenizerFast:
    """tests.tiny_models' word-level tokenizer plus yes/no words, so the LM reranker can run."""
    vocab = {"<unk>": 0, "<bos>": 1, "<eos>": 2}
    for word in list(WORDS) + ["yes", "no", "Yes", "No"]:
        vocab.setdefault("▁" + word, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<bos>", eos_token="<eos>")


@pytest.fixture(scope="module")
def lm():
    tok = tokenizer_with_yes_no()
    model = tiny_llama(len(tok), seed=5)
    # Keep the random model from writing <unk> and <eos> at once, so it writes words.
    model.lm_head.register_forward_hook(lambda module, args, out: out.index_fill(-1, torch.tensor([0, 2]), -1e4))
    return HFLanguageModel(model, tok, name="tiny")


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("idx") / "index"
    BM25Index.build([Passage(f"p{i}", t, x) for i, (t, x) in enumerate(TEXTS)], out, progress=False)
    return out


@pytest.fixture(scope="module")
def index(index_dir):
    return BM25Index.load(index_dir, backend="numpy")  # numba's JIT would cost seconds per test run


@pytest.fixture(scope="module")
def builder():
    return PromptBuilder.for_dataset("default", n_exemplars=1)


def single(lm, index, builder, **options):
    return build_method("single", lm, index, {"max_new_tokens": 8, **options}, builder)


def kinds(answer):
    return [s.kind for s in answer.trace.steps]


def test_default_options_retrieve_top_k_and_load_nothing(lm, index, builder):
    method = single(lm, index, builder, k=2)
    answer = method.answer(QUESTION)
    assert kinds(answer)[0] == "generate" and not {"classify", "hyde", "rerank", "repack", "compress"} & set(kinds(answer))
    (retrieval,) = answer.trace.retrievals
    assert retrieval.reason == "before generation" and retrieval.query == QUESTION
    assert retrieval.hits == index.search(QUESTION, 2)
    assert method.chain._embedder is None and method.chain._classifier is None
    assert method.chain._reranker is None and method.chain._compressor is None


def test_embedding_rerank_keeps_the_best_k_of_the_candidates(lm, index, builder):
    answer = single(lm, index, builder, k=2, rerank="embedding", candidates=5).answer(QUESTION)
    candidates = index.search(QUESTION, 5)
    expected = EmbeddingReranker(Embedder.load()).rerank(QUESTION, candidates, 2)
    (retrieval,) = answer.trace.retrievals
    assert [h.id for h in retrieval.hits] == [h.id for h in expected]
    step = answer.trace.steps[0]
    assert step.kind == "rerank" and step.details["reranker"] == "embedding"
    assert [c["id"] for c in step.details["candidates"]] == [h.id for h in candidates]
    assert all(c["rerank_score"] is not None for c in step.details["candidates"])
    assert step.details["kept"] == [h.id for h in expected]
    assert f"reranked by embedding, {len(candidates)} -> 2" in retrieval.reason


def test_lm_rerank_runs_one_pass_per_candidate(lm, index, builder):
    answer = single(lm, index, builder, k=2, rerank="lm", candidates=4).answer(QUESTION)
    step = next(s for s in answer.trace.steps if s.kind == "rerank")
    scores = [c["rerank_score"] for c in step.details["candidates"]]
    assert len(scores) == 4 and all(0.0 < s < 1.0 for s in scores)
    assert [h.score for h in answer.trace.retrievals[0].hits] == sorted(scores, reverse=True)[:2]


@pytest.mark.parametrize("order", ["reverse", "sides"])
def test_repack_reorders_the_ranked_hits(lm, index, builder, order):
    answer = single(lm, index, builder, k=3, repack=order).answer(QUESTION)
    assert answer.trace.retrievals[0].hits == repack(index.search(QUESTION, 3), order)
    step = answer.trace.steps[0]
    assert step.kind == "repack" and step.details == {"order": order, "ids": [h.id for h in answer.trace.retrievals[0].hits]}


def test_extractive_compression_shortens_the_passages_within_budget(lm, index, builder):
    answer = single(lm, index, builder, k=3, compress="extractive", compress_budget=15).answer(QUESTION)
    step = answer.trace.steps[0]
    assert step.kind == "compress" and step.details["compress"] == "extractive"
    hits = answer.trace.retrievals[0].hits
    originals = {h.id: h for h in index.search(QUESTION, 3)}
    assert sum(len(h.text.split()) for h in hits) == step.details["words_after"] <= 15
    for h in hits:
        assert all(s in originals[h.id].text for s in h.text.split(". "))  # kept sentences, not rewritten
    assert "extractive compression" in answer.trace.retrievals[0].reason


def test_selective_compression_keeps_about_the_ratio(lm, index, builder):
    answer = single(lm, index, builder, k=3, compress="selective", compress_ratio=0.5).answer(QUESTION)
    d = next(s for s in answer.trace.steps if s.kind == "compress").details
    assert 0.5 * d["words_before"] <= d["words_after"] < d["words_before"]


def test_hyde_searches_with_the_question_and_a_written_passage(lm, index, builder):
    answer = single(lm, index, builder, query_transform="hyde", hyde_max_new_tokens=6).answer(QUESTION)
    step = answer.trace.steps[0]
    assert step.kind == "hyde" and 1 <= step.generated_tokens <= 6 and step.kept_tokens == 0
    (retrieval,) = answer.trace.retrievals
    assert retrieval.query == step.details["query"] and retrieval.query.startswith(QUESTION)
    assert retrieval.hits == index.search(retrieval.query, 3)


def test_classifier_skips_retrieval_for_a_self_contained_request(lm, index, builder):
    method = single(lm, index, builder, classify=True)
    direct = method.answer("Translate 'the old bridge' into French.")
    assert direct.trace.retrievals == []
    step = direct.trace.steps[0]
    assert step.kind == "classify" and step.details["decision"] == "answer directly"
    assert "p(needs retrieval)" in step.details["reason"] and step.details["p_needs_retrieval"] < 0.5
    retrieved = method.answer(QUESTION)
    assert retrieved.trace.steps[0].details["decision"] == "retrieve" and len(retrieved.trace.retrievals) == 1


def test_balanced_preset_runs_the_whole_chain_in_order(lm, index, builder):
    answer = single(lm, index, builder, preset="balanced", candidates=5).answer(QUESTION)
    assert kinds(answer)[:4] == ["classify", "rerank", "repack", "compress"]
    assert "generate" in kinds(answer)
    options = answer.trace.options
    for key, value in PRESETS["balanced"].items():
        assert options[key] == value


def test_explicit_options_override_the_preset_and_resolve_stably():
    options = parse_options("single", {"preset": "balanced", "rerank": "none", "repack": "sides"})
    assert (options.classify, options.rerank, options.repack, options.compress) == (True, "none", "sides", "extractive")
    assert parse_options("single", options.model_dump()) == options  # a run's saved config re-parses the same
    best = parse_options("single", {"preset": "best"})
    assert (best.query_transform, best.rerank, best.repack) == ("hyde", "lm", "reverse")
    assert parse_options("single", {}).model_dump()["preset"] == "none"


def test_option_errors_name_the_option():
    from dynrag.errors import ConfigError

    with pytest.raises(ConfigError, match="rerank_model"):
        parse_options("single", {"rerank": "cross_encoder"})
    with pytest.raises(ConfigError, match="'candidates'.*>= k"):
        parse_options("single", {"rerank": "lm", "candidates": 2})
    assert parse_options("single", {"rerank": "lm", "k": 12}).candidate_count == 12
    with pytest.raises(ConfigError, match="preset"):
        parse_options("single", {"preset": "fastest"})


def test_a_missing_cross_encoder_fails_when_the_method_is_built(lm, index, builder, tmp_path):
    from dynrag.errors import ConfigError

    with pytest.raises(ConfigError, match="no-model: no such directory"):
        single(lm, index, builder, rerank="cross_encoder", rerank_model=str(tmp_path / "no-model"))


@pytest.mark.parametrize("flag", [["--option", "preset=balanced"], ["--preset", "balanced"]])
def test_ask_takes_the_preset(lm, index_dir, monkeypatch, flag):
    import dynrag.cli as cli

    monkeypatch.setattr(cli, "_load_lm_with_status", lambda spec: lm)
    load = BM25Index.load.__func__  # numpy search: numba's JIT would cost seconds here
    monkeypatch.setattr(BM25Index, "load", classmethod(lambda cls, d, *a, **k: load(cls, d, *a, **{**k, "backend": "numpy"})))
    result = CliRunner().invoke(
        cli.app, ["ask", QUESTION, "--corpus", str(index_dir), *flag, "--option", "max_new_tokens=6", "--json"],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["options"]["preset"] == "balanced" and data["options"]["rerank"] == "embedding"
    assert [s["kind"] for s in data["steps"]][:4] == ["classify", "rerank", "repack", "compress"]
    # the paper's balanced configuration searches with Hybrid: the dense part was built into the index
    assert (index_dir / "dense" / "vectors.npy").is_file()


def test_ask_retriever_flags(lm, index_dir, monkeypatch):
    import dynrag.cli as cli

    monkeypatch.setattr(cli, "_load_lm_with_status", lambda spec: lm)
    ask = ["ask", QUESTION, "--corpus", str(index_dir), "--option", "max_new_tokens=4", "--json"]
    result = CliRunner().invoke(cli.app, [*ask, "--retriever", "dense", "--option", "k=2"])
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)["retrievals"][0]["hits"]
    assert len(hits) == 2 and all(-1.0 <= h["score"] <= 1.0 for h in hits)  # cosine scores, not BM25's
    bad = CliRunner().invoke(cli.app, [*ask, "--retriever", "sparse"])
    assert bad.exit_code != 0 and "choose one of: bm25, dense, hybrid, milvus" in bad.output
    bad = CliRunner().invoke(cli.app, [*ask, "--method", "direct", "--retriever", "dense"])
    assert bad.exit_code != 0 and "method 'direct' does not retrieve" in bad.output


# -- the bundled model (slow) -------------------------------------------------------------------

BUNDLED_TEXTS = [
    ("Velmora Bridge", "The Velmora Bridge spans the River Lune at Harrowgate. It was designed by the engineer "
     "Ansel Quist and opened in 1893. Its three stone arches were restored in 1961."),
    ("Ansel Quist", "Ansel Quist was an engineer born in Harrowgate in 1851. He trained in Glasgow and built "
     "bridges and mills along the River Lune."),
    ("Harrowgate", "Harrowgate is a market town on the River Lune. Its weekly market dates from 1702."),
    ("River Lune", "The River Lune rises in the Howgill Fells and flows south-west to the Irish Sea."),
    ("Quist Mill", "Quist Mill is a former cotton mill in Harrowgate, built in 1880 and now a museum."),
    ("Glasgow", "Glasgow is the largest city in Scotland, on the River Clyde."),
]


@pytest.mark.slow
def test_balanced_preset_on_the_bundled_model(tmp_path):
    from dynrag.lm import load_lm

    BM25Index.build([Passage(f"b{i}", t, x) for i, (t, x) in enumerate(BUNDLED_TEXTS)], tmp_path / "idx", progress=False)
    index = BM25Index.load(tmp_path / "idx", backend="numpy")
    lm = load_lm("bundled:smollm2")
    method = build_method("single", lm, index, {"preset": "balanced", "candidates": 6, "compress_budget": 40},
                          PromptBuilder.for_dataset("default"))

    answer = method.answer("Who designed the Velmora Bridge?")
    assert [s.kind for s in answer.trace.steps][:4] == ["classify", "rerank", "repack", "compress"]
    (retrieval,) = answer.trace.retrievals
    hits = retrieval.hits
    assert len(hits) >= 1 and hits[-1].id == "b0"  # reverse order: the best passage sits next to the question
    assert sum(len(h.text.split()) for h in hits) <= 40
    assert "Ansel Quist" in " ".join(h.text for h in hits)
    assert answer.final_answer  # the answer phrase was written and extracted
    assert "quist" in answer.text.lower()

    direct = method.answer("Translate 'good morning, neighbour' into French.")
    assert direct.trace.retrievals == [] and direct.trace.steps[0].details["decision"] == "answer directly"
