"""Corpus records and the streaming readers that produce them."""

from dynrag.corpus.passage import Passage
from dynrag.corpus.readers import read_passages

__all__ = ["Passage", "read_passages"]
