"""Cross-encoder reranking with a tiny randomly initialised BERT classifier saved to disk."""

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

from dynrag.errors import ConfigError, DynragError
from dynrag.rerank.cross_encoder import CrossEncoderReranker
from dynrag.retrieval.base import Hit

WORDS = "who built the old bridge river flows south town museum was in by an engineer 1887 : ?".split()
HITS = [
    Hit("a", "", "the river flows south", 3.0),
    Hit("b", "", "the old bridge was built in 1887 by an engineer", 2.0),
    Hit("c", "town", "the museum", 1.0),
]


def save_tiny_cross_encoder(directory, num_labels):
    directory.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab_file=str(directory / "vocab.txt"))
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64, num_labels=num_labels,
        initializer_range=0.5,  # large random weights: clearly different scores per passage
    )
    BertForSequenceClassification(config).eval().save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return tokenizer


@pytest.mark.parametrize("num_labels", [1, 2])
def test_scores_are_the_models_relevance_outputs(tmp_path, num_labels):
    save_tiny_cross_encoder(tmp_path / "ce", num_labels)
    reranker = CrossEncoderReranker.load(tmp_path / "ce", batch_size=2)  # two batches for three hits
    question = "who built the bridge ?"
    model = BertForSequenceClassification.from_pretrained(tmp_path / "ce").eval()
    tok = BertTokenizerFast.from_pretrained(tmp_path / "ce")
    expected = {}
    for h in HITS:
        text = f"{h.title}: {h.text}" if h.title else h.text
        with torch.inference_mode():
            logits = model(**tok(question, text, return_tensors="pt")).logits[0]
        expected[h.id] = float(logits[0]) if num_labels == 1 else float(torch.softmax(logits, -1)[-1])
    out = reranker.rerank(question, HITS, top_k=3)
    assert sorted(h.id for h in out) == ["a", "b", "c"]
    assert [h.score for h in out] == sorted((h.score for h in out), reverse=True)
    for h in out:
        assert h.score == pytest.approx(expected[h.id], abs=1e-5)


def test_a_missing_model_directory_is_named(tmp_path):
    with pytest.raises(ConfigError, match="no-such-model: no such directory"):
        CrossEncoderReranker.load(tmp_path / "no-such-model")
    with pytest.raises(ConfigError, match="rerank_model"):
        CrossEncoderReranker.load(None)


def test_a_directory_without_a_model_is_named(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DynragError, match="cannot load cross-encoder model .*empty"):
        CrossEncoderReranker.load(tmp_path / "empty")


def test_the_cross_encoder_runs_where_its_device_says(tmp_path):
    save_tiny_cross_encoder(tmp_path / "ce", num_labels=1)
    reranker = CrossEncoderReranker.load(tmp_path / "ce", device="cpu")
    assert reranker.model.device.type == "cpu" and reranker.scores("who built the bridge ?", HITS).shape == (3,)
    with pytest.raises(ConfigError, match="cuda:99 asked for"):
        CrossEncoderReranker.load(tmp_path / "ce", device="cuda:99")
