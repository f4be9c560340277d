"""Small-to-big retrieval: search small chunks, answer with the large chunks that hold them.

An index built with ``--chunk small-to-big:SMALL:LARGE[:OVERLAP]`` holds the small chunks as its
passages (BM25, and the dense part when built) and the large chunks in ``parents.jsonl`` (one
``{"id", "title", "text"}`` per line, written inside the index build so it is replaced atomically
with the rest). ``retrieval/factory.py`` wraps any retriever over such an index in
``SmallToBigRetriever``, so bm25, dense, hybrid and milvus all return large chunks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dynrag.corpus.passage import Passage
from dynrag.errors import DataError, IndexDirError
from dynrag.io.jsonl import read_jsonl
from dynrag.retrieval.base import BatchSearch, Hit, Retriever, close_retriever
from dynrag.retrieval.store import PARENTS as PARENTS_FILE
from dynrag.text.chunking import parse_chunk_spec, small_chunk_parent


def is_small_to_big(manifest: dict) -> bool:
    return parse_chunk_spec(str(manifest.get("chunk", "none"))).kind == "small-to-big"


def load_parents(index_dir: Path) -> dict[str, Passage]:
    """The large chunks of a small-to-big index, by id."""
    path = Path(index_dir) / PARENTS_FILE
    if not path.is_file():
        raise IndexDirError(f"{index_dir}: a small-to-big index without {PARENTS_FILE}; rebuild it")
    try:
        records = read_jsonl(path, validate=_passage_problem, whole=True)
    except DataError as exc:
        raise IndexDirError(f"{exc}; rebuild the index") from exc
    return {r["id"]: Passage(r["id"], r["title"], r["text"]) for r in records}


def _passage_problem(record: Any) -> str | None:
    if isinstance(record, dict) and all(isinstance(record.get(k), str) for k in ("id", "title", "text")):
        return None
    return "not a passage record (id, title, text)"


class SmallToBigRetriever(BatchSearch):
    """Search small chunks, return their enclosing large chunks.

    Each large chunk appears once, scored by its best small chunk, best first. The small-chunk
    retriever is asked for ``fanout * k`` hits (more when too few distinct parents come back,
    up to ``max_fanout * k``). ``parents`` maps a large id to its chunk (a dict, or any callable).
    """

    def __init__(
        self,
        small: Retriever,
        parents: Mapping[str, Passage] | Callable[[str], Passage],
        fanout: int = 4,
        max_fanout: int = 64,
    ):
        self.small = small
        self._parent = parents.__getitem__ if isinstance(parents, Mapping) else parents
        self.fanout = max(1, int(fanout))
        self.max_fanout = max(self.fanout, int(max_fanout))

    def close(self) -> None:
        close_retriever(self.small)

    def search_batch(self, queries: list[str], k: int) -> list[list[Hit]]:
        results = [None] * len(queries)
        pending = list(range(len(queries)))
        fanout = self.fanout
        while pending:
            small_hits = self.small.search_batch([queries[i] for i in pending], fanout * k)
            still = []
            for qi, hits in zip(pending, small_hits):
                best: dict[str, float] = {}
                for h in hits:
                    pid = small_chunk_parent(h.id)
                    if pid not in best or h.score > best[pid]:
                        best[pid] = float(h.score)
                exhausted = len(hits) < fanout * k
                if len(best) >= k or exhausted or fanout >= self.max_fanout:
                    parents = sorted(best.items(), key=lambda item: -item[1])[:k]
                    results[qi] = [
                        Hit(pid, (p := self._parent(pid)).title, p.text, score) for pid, score in parents
                    ]
                else:
                    still.append(qi)
            pending = still
            fanout = min(fanout * 4, self.max_fanout)
        return results
