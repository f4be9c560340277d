"""DeepRAG inference: the retrieval narrative (narrative.py), the atomic decision (decision.py) and
the method's loop (method.py)."""

from dynrag.methods.deeprag.method import DeepRag, DeepRagOptions

__all__ = ["DeepRag", "DeepRagOptions"]
