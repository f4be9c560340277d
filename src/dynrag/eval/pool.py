"""`--corpus contexts`: the context paragraphs of all loaded questions pooled into one BM25 index."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from dynrag.corpus.passage import Passage
from dynrag.errors import DynragError, IndexDirError
from dynrag.datasets.loaders import QAExample
from dynrag.io.rundir import CONTEXTS_INDEX
from dynrag.retrieval.bm25 import BM25Index

__all__ = ["CONTEXTS_INDEX", "contexts_index", "pool_contexts"]


def pool_contexts(examples: Iterable[QAExample]) -> list[Passage]:
    """Every distinct context paragraph, first-seen order; ids are content hashes of the
    whitespace-normalised (title, text), so duplicates across questions collapse into one."""
    pooled: dict[str, Passage] = {}
    for ex in examples:
        for p in ex.contexts:
            pooled.setdefault(p.id, p)
    return list(pooled.values())


def _matches(index: BM25Index, passages: list[Passage]) -> bool:
    if len(index) != len(passages) or index.manifest.get("chunk", "none") != "none":
        return False
    return all(index.passage(i).id == p.id for i, p in enumerate(passages))


def contexts_index(run_dir: Path, passages: list[Passage], progress: bool = True) -> tuple[BM25Index, bool]:
    """(index, built): reuse RUN_DIR/contexts-index when it holds exactly these passages,
    otherwise (re)build it (the build is atomic, so a crash never leaves half an index)."""
    if not passages:
        raise DynragError(
            "--corpus contexts: the loaded questions carry no context paragraphs; pass --corpus DIR"
        )
    path = Path(run_dir) / CONTEXTS_INDEX
    if (path / "manifest.json").exists():
        try:
            index = _load(path)
            if _matches(index, passages):
                return index, False
        except IndexDirError:
            pass  # unreadable: rebuild below
    BM25Index.build(passages, path, progress=progress, total=len(passages))
    return _load(path), True


def _load(path: Path) -> BM25Index:
    # A pooled corpus is small (thousands of passages: a few ms a search with numpy), and numba's
    # JIT compile would add 7-10 s to every run on a small CPU.
    return BM25Index.load(path, backend="numpy")
