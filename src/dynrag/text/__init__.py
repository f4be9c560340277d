"""Text utilities: sentence splitting, chunking and word-level helpers."""
