"""Cross-encoder reranking with a transformers sequence-classification model from a directory.

No cross-encoder weights ship on PyPI, so this takes the user's own model directory (for example
a downloaded cross-encoder/ms-marco-MiniLM-L-6-v2). The score is the logit when the model has one
output, otherwise the probability of its last label ("relevant" in monoBERT-style models).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dynrag.errors import ConfigError, DynragError, first_line
from dynrag.rerank.base import passage_text, ranked
from dynrag.retrieval.base import Hit


class CrossEncoderReranker:
    name = "cross_encoder"

    def __init__(self, model, tokenizer, path: str, max_length: int = 512, batch_size: int = 16):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.path = path
        self.max_length = max_length
        self.batch_size = batch_size

    @classmethod
    def load(cls, path: str | Path | None, device: str = "auto", **kwargs) -> "CrossEncoderReranker":
        if not path:
            raise ConfigError("rerank=cross_encoder needs rerank_model=PATH (a sequence-classification model directory)")
        directory = Path(path).expanduser()
        if not directory.is_dir():
            raise ConfigError(f"cross-encoder model {path}: no such directory")
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(directory)
            model = AutoModelForSequenceClassification.from_pretrained(directory)
        except (OSError, ValueError) as exc:
            raise DynragError(f"cannot load cross-encoder model {path}: {first_line(exc)}") from exc
        from dynrag.lm.device import resolve_placement

        placement = resolve_placement(device, "float32", spec=f"cross-encoder model {path}")
        if placement.device != "cpu":
            model = model.to(placement.device)
        return cls(model, tokenizer, str(path), **kwargs)

    def scores(self, query: str, hits: list[Hit]) -> np.ndarray:
        import torch

        out = np.zeros(len(hits), dtype=np.float64)
        with torch.inference_mode():
            for start in range(0, len(hits), self.batch_size):
                batch = hits[start : start + self.batch_size]
                enc = self.tokenizer(
                    [query] * len(batch), [passage_text(h) for h in batch], padding=True,
                    truncation=True, max_length=self.max_length, return_tensors="pt",
                )
                enc = {key: value.to(self.model.device) for key, value in enc.items()}
                logits = self.model(**enc).logits.float()
                if logits.shape[-1] == 1:
                    values = logits[:, 0]
                else:
                    values = torch.softmax(logits, dim=-1)[:, -1]
                out[start : start + len(batch)] = values.cpu().numpy()
        return out

    def rerank(self, query: str, hits: list[Hit], top_k: int) -> list[Hit]:
        return ranked(hits, self.scores(query, hits), top_k)
