"""The shipped query classifier: load its weights, embed a request, decide whether to retrieve."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from dynrag.classify.logistic import predict_proba
from dynrag.errors import DynragError

FORMAT_VERSION = 1
WEIGHTS_FILE = "query_classifier.npz"


def default_weights_path() -> Path:
    return Path(str(resources.files("dynrag.data").joinpath(WEIGHTS_FILE)))


@dataclass(frozen=True)
class QueryDecision:
    needs_retrieval: bool
    probability: float  # p(needs retrieval)
    threshold: float


class QueryClassifier:
    """p(needs retrieval) = sigmoid(embedding . W + b) on the request's sentence embedding."""

    def __init__(self, w: np.ndarray, b: float, embedding_model: str, embedder=None, metadata: dict | None = None):
        self.w = np.asarray(w, dtype=np.float64).ravel()
        self.b = float(b)
        self.embedding_model = embedding_model
        self.embedder = embedder
        self.metadata = metadata or {}

    @classmethod
    def load(cls, path: str | Path | None = None, embedder=None) -> "QueryClassifier":
        path = Path(path) if path else default_weights_path()
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        except FileNotFoundError as exc:
            raise DynragError(f"{path}: no such query-classifier file (train one with scripts/train_query_classifier.py)") from exc
        except (OSError, ValueError) as exc:
            raise DynragError(f"{path}: not a query-classifier .npz file ({exc})") from exc
        missing = {"W", "b", "embedding_model", "version"} - set(arrays)
        if missing:
            raise DynragError(f"{path}: query-classifier file lacks {', '.join(sorted(missing))}")
        version = int(arrays["version"])
        if version != FORMAT_VERSION:
            raise DynragError(f"{path}: query-classifier format {version}, this dynrag reads {FORMAT_VERSION}")
        metadata = {k: v.item() if v.ndim == 0 else v.tolist() for k, v in arrays.items() if k not in ("W", "b")}
        return cls(arrays["W"], float(np.asarray(arrays["b"]).ravel()[0]), str(arrays["embedding_model"]), embedder, metadata)

    def check_embedder(self):
        """The embedder, loaded on first use and checked to be the one the weights were trained on."""
        if self.embedder is None:
            from dynrag.retrieval.embedder import Embedder

            self.embedder = Embedder.load()
        if self.embedder.name != self.embedding_model:
            raise DynragError(
                f"the query classifier was trained on {self.embedding_model!r} embeddings, "
                f"not {self.embedder.name!r}"
            )
        if self.embedder.dimension != self.w.size:
            raise DynragError(f"query classifier expects {self.w.size}-dim embeddings, got {self.embedder.dimension}")
        return self.embedder

    def probabilities(self, texts: list[str]) -> np.ndarray:
        """p(needs retrieval) for each text."""
        return predict_proba(self.check_embedder().encode(texts), self.w, self.b)

    def decide(self, text: str, threshold: float = 0.5) -> QueryDecision:
        p = float(self.probabilities([text])[0])
        return QueryDecision(needs_retrieval=p >= threshold, probability=p, threshold=threshold)
