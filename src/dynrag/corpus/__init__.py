"""Corpus records and the streaming readers that produce them."""

from dynrag.corpus.passage import Passage
from dynrag.corpus.readers import changed_sources, read_passages, source_stamps

__all__ = ["Passage", "changed_sources", "read_passages", "source_stamps"]
