"""Sentence embeddings: a packaged model (``packaged:NAME``, default all-MiniLM-L6-v2) or any
sentence-embedding model directory.

Plain AutoModel + the pooling the model's sentence-transformers configuration names (mean or CLS
token, ...) + L2 normalisation, which gives the same vectors as sentence-transformers for these
models, without depending on that package. The packaged models: ``retrieval/embedding_models.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from dynrag.errors import DynragError
from dynrag.retrieval.embedding_models import (
    DEFAULT_MAX_LENGTH, PREFIX, PackagedEmbedding, Pooling, install_hint, model_directory, read_sentence_config,
    resolve_embedding,
)


def pool(hidden: Any, mask: Any, mode: Pooling) -> Any:
    """Token vectors ``hidden`` (batch, tokens, dim) pooled into one vector per text, over the
    tokens where ``mask`` (batch, tokens) is 1, as sentence-transformers' Pooling does."""
    if mode == "cls":
        return hidden[:, 0]  # the tokenizers of these models pad on the right: token 0 is the CLS token
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    if mode == "max":
        return hidden.masked_fill(weights == 0, -1e9).max(dim=1).values
    summed = (hidden * weights).sum(1)
    counts = weights.sum(1).clamp(min=1e-9)
    if mode == "mean":
        return summed / counts
    if mode == "mean_sqrt_len":
        return summed / counts.sqrt()
    raise DynragError(f"unknown pooling {mode!r}; choose one of: cls, max, mean, mean_sqrt_len")


class Embedder:
    """Encodes texts into L2-normalised float32 vectors."""

    def __init__(self, model, tokenizer, name: str, max_length: int = DEFAULT_MAX_LENGTH,
                 pooling: Pooling = "mean", lowercase: bool = False):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.max_length = max_length
        self.pooling: Pooling = pooling
        self.lowercase = lowercase

    @classmethod
    def load(cls, path: str | Path | None = None, device: str = "auto") -> "Embedder":
        """``path``: a model directory, ``packaged:NAME``, or None for the packaged default.
        ``device``: auto (the first CUDA device where one is present, else the CPU), cpu, cuda[:N],
        mps; the vectors are float32 wherever they are computed."""
        from transformers import AutoModel, AutoTokenizer

        from dynrag.lm.device import resolve_placement

        spec = resolve_embedding(path)
        directory = model_directory(spec) if isinstance(spec, PackagedEmbedding) else spec
        config = read_sentence_config(directory)
        if isinstance(spec, PackagedEmbedding) and (config.pooling, config.max_length) != (spec.pooling, spec.max_length):
            raise DynragError(
                f"{PREFIX}{spec.name}: its files ask for {config.pooling} pooling over {config.max_length} tokens, "
                f"the registry pins {spec.pooling} over {spec.max_length}; reinstall: {install_hint(spec)}"
            )
        try:
            tokenizer = AutoTokenizer.from_pretrained(config.transformer_dir)
            model = AutoModel.from_pretrained(config.transformer_dir)
        except (OSError, ValueError) as exc:
            raise DynragError(f"cannot load embedding model {directory}: {str(exc).splitlines()[0]}") from exc
        placement = resolve_placement(device, "float32", spec=f"embedding model {directory}")
        if placement.device != "cpu":
            model = model.to(placement.device)
        name = spec.embedder_name if isinstance(spec, PackagedEmbedding) else str(path)
        return cls(model, tokenizer, name=name, max_length=config.max_length, pooling=config.pooling,
                   lowercase=config.lowercase)

    @property
    def dimension(self) -> int:
        return int(self.model.config.hidden_size)

    def encode(self, texts: Sequence[str], batch_size: int = 64, progress: bool = False) -> np.ndarray:
        import torch

        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        # Sorting by length keeps padding (wasted compute) small inside each batch.
        order = np.argsort([len(t) for t in texts], kind="stable")
        batches = range(0, len(texts), batch_size)
        if progress:
            from tqdm import tqdm

            batches = tqdm(batches, desc="Embedding", unit="batch")
        with torch.inference_mode():
            for start in batches:
                idx = order[start : start + batch_size]
                enc = self.tokenizer(
                    [texts[i].lower() if self.lowercase else texts[i] for i in idx], padding=True, truncation=True,
                    max_length=self.max_length, return_tensors="pt",
                )
                enc = {key: value.to(self.model.device) for key, value in enc.items()}
                hidden = self.model(**enc).last_hidden_state
                pooled = pool(hidden, enc["attention_mask"], self.pooling)
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                out[idx] = pooled.float().cpu().numpy()
        return out
