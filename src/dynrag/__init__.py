"""dynrag: dynamic retrieval-augmented generation (DRAGIN, DeepRAG, RAG best practices)."""

__version__ = "0.1.0"
