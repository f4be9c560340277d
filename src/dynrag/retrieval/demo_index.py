"""The demo corpus's BM25 index, built once into the model cache: what `dynrag demo` searches and
what `dynrag serve` searches when no --index is given."""

from __future__ import annotations

import hashlib
from pathlib import Path

from rich.console import Console
from rich.text import Text

from dynrag.corpus import read_passages
from dynrag.data import demo_passages_path
from dynrag.lm.bundled import cache_root
from dynrag.retrieval.bm25 import BM25Index


def demo_index_dir() -> Path:
    """The demo index lives in the cache, keyed by the corpus file's hash so edits rebuild it."""
    digest = hashlib.sha256(demo_passages_path().read_bytes()).hexdigest()[:12]
    return cache_root() / f"demo-index-{digest}"


def ensure_demo_index(console: Console, progress: bool = True) -> BM25Index:
    out = demo_index_dir()
    if not (out / "manifest.json").exists():
        console.print(Text(f"building the demo index in {out}"))
        BM25Index.build(read_passages(demo_passages_path()), out, progress=progress)
    return BM25Index.load(out, backend="numpy")
