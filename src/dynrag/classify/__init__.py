"""Query classification: does a request need retrieval at all?

Requests that carry everything they need (translate this, rewrite, summarise this text,
arithmetic, format conversion) are answered directly; requests that need outside knowledge go
through retrieval. A logistic regression on all-MiniLM-L6-v2 sentence embeddings, trained by
scripts/train_query_classifier.py on the project's own labelled examples and shipped as
dynrag/data/query_classifier.npz (plain arrays, no pickle).
"""

from dynrag.classify.query import QueryClassifier, QueryDecision

__all__ = ["QueryClassifier", "QueryDecision"]
