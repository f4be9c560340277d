"""Filling an OpenSearch index from a corpus stream: bulk requests of one batch at a time (constant
memory in corpus size), each passage's id as the document ``_id`` (so sending a passage twice
overwrites it: a re-run never duplicates), and a checkpoint after every acknowledged batch in the
mapping's ``_meta.dynrag.ingested``, so the same command after a crash or kill -9 skips what the
index already holds and finishes it.

The checkpoint is tied to its source (path, size, modification time): a different corpus, or other
k1/b, into an existing index is an error unless ``replace`` (the index is then deleted and made
anew). Refresh is off during ingest (a real cluster then writes segments less often) and back at
the end, when ``_meta`` records the passage count, the corpus checksum (the same sha256 a ``bm25``
index of the same corpus records) and ``complete: true``; until then searching refuses the index.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import dynrag
from dynrag.corpus.passage import Passage
from dynrag.errors import DataError, DynragError, IndexDirError
from dynrag.progress import stderr_bar
from dynrag.retrieval.opensearch import INDEX_FORMAT, INDEX_FORMAT_VERSION, call, connect, index_meta
from dynrag.retrieval.store_writer import PassageWriter

DEFAULT_K1, DEFAULT_B = 1.2, 0.75  # Lucene's BM25 defaults, which the papers' Elasticsearch index used
DEFAULT_BATCH = 500
MAX_ID_BYTES = 512  # OpenSearch's limit on _id


def source_identity(path: str | Path) -> dict[str, Any]:
    """What ties a checkpoint to its corpus: the resolved path, its size and modification time."""
    p = Path(path)
    st = p.stat()
    return {"path": str(p.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def index_body(meta: dict[str, Any], k1: float, b: float, shards: int, replicas: int) -> dict[str, Any]:
    text = {"type": "text", "analyzer": "english", "similarity": "dynrag_bm25"}
    return {
        "settings": {
            "number_of_shards": shards,
            "number_of_replicas": replicas,
            "refresh_interval": "-1",  # back to the default when ingest completes
            "similarity": {"dynrag_bm25": {"type": "BM25", "k1": k1, "b": b}},
        },
        "mappings": {"dynamic": "strict", "_meta": {"dynrag": meta},
                     "properties": {"title": text, "text": text}},
    }


def build_opensearch_index(
    passages: Iterable[Passage],
    url: str,
    index: str,
    *,
    k1: float = DEFAULT_K1,
    b: float = DEFAULT_B,
    batch_size: int = DEFAULT_BATCH,
    shards: int = 1,
    replicas: int = 0,
    replace: bool = False,
    source: dict[str, Any] | None = None,
    total: int | None = None,
    progress: bool = True,
    say: Any = None,
) -> dict[str, Any]:
    """Ingest ``passages`` into ``index`` at ``url`` (resuming a checkpoint of the same ``source``);
    returns the index's final ``_meta.dynrag``. ``say`` prints a line (resuming, warnings)."""
    from opensearchpy import helpers

    if batch_size < 1:
        raise DynragError(f"--batch-size must be at least 1 (got {batch_size})")
    say = say or (lambda line: None)
    client = connect(url)
    settings = {"k1": float(k1), "b": float(b), "analyzer": "english", "fields": ["title", "text"]}
    meta = _prepare(client, url, index, settings, source, replace, shards, replicas, say)
    if meta.get("complete"):
        client.close()
        return meta
    resume_at = int(meta["ingested"])
    hashed = PassageWriter(None)  # counts and hashes every passage, sent or skipped
    ingested = resume_at
    batch: list[Passage] = []

    def send(batch: list[Passage]) -> None:
        nonlocal ingested
        actions = [{"_op_type": "index", "_index": index, "_id": p.id,
                    "_source": {"title": p.title, "text": p.text}} for p in batch]
        _, errors = call(url, index, f"ingesting into {index!r}", lambda: helpers.bulk(
            client, actions, chunk_size=len(actions), max_chunk_bytes=1 << 30, raise_on_error=False,
            raise_on_exception=True, max_retries=5, initial_backoff=1))
        if errors:
            first = next(iter(errors[0].values()))
            raise DynragError(f"OpenSearch at {url} refused passage {first.get('_id')!r} into {index!r}: "
                              f"{(first.get('error') or {}).get('reason', first.get('error'))}")
        ingested += len(batch)
        meta["ingested"] = ingested
        _checkpoint(client, url, index, meta)

    with stderr_bar(total, "OpenSearch", progress) as bar:
        if resume_at:
            bar.update(resume_at)
        for p in passages:
            if len(p.id.encode("utf-8")) > MAX_ID_BYTES:
                raise DataError(f"passage {p.id[:40]!r}...", f"id longer than OpenSearch's {MAX_ID_BYTES}-byte _id limit")
            hashed.add([p])
            if hashed.count <= resume_at:
                continue  # the index already holds it (the checkpoint says so)
            batch.append(p)
            if len(batch) == batch_size:
                send(batch)
                bar.update(len(batch))
                batch = []
        if batch:
            send(batch)
            bar.update(len(batch))
    hashed.finish()  # an empty corpus is an error
    if hashed.count < resume_at:
        raise DynragError(f"the corpus has {hashed.count:,} passages but index {index!r} already holds {resume_at:,} "
                          "of it: the source changed; rebuild with --replace")
    call(url, index, "finishing the index", lambda: client.indices.put_settings(
        index=index, body={"index": {"refresh_interval": None}}))
    call(url, index, "refreshing the index", lambda: client.indices.refresh(index=index))
    count = int(call(url, index, "counting documents", lambda: client.count(index=index))["count"])
    if count < hashed.count:
        say(f"[yellow]{hashed.count - count:,} passages share an id with an earlier one: the index holds "
            f"{count:,} documents (the last passage of each id)[/yellow]")
    meta.update(ingested=hashed.count, complete=True, passage_count=count, corpus_sha256=hashed.sha256,
                completed=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    _checkpoint(client, url, index, meta)
    client.close()
    return meta


def _prepare(client: Any, url: str, index: str, settings: dict[str, Any], source: dict[str, Any] | None,
             replace: bool, shards: int, replicas: int, say: Any) -> dict[str, Any]:
    """Create the index, or check an existing one may be resumed; returns its ``_meta.dynrag``
    (``ingested``: the passages to skip)."""
    exists = call(url, index, f"checking index {index!r}", lambda: client.indices.exists(index=index))
    if exists and replace:
        call(url, index, f"deleting index {index!r}", lambda: client.indices.delete(index=index))
        exists = False
    if exists:
        meta = index_meta(client, url, index)
        if meta is None:
            raise IndexDirError(f"OpenSearch index {index!r} at {url} exists and was not built by dynrag; "
                              "choose another --name, or --replace to delete and rebuild it")
        same = source is not None and meta.get("source") == source and all(
            meta.get(key) == value for key, value in settings.items())
        if not same:
            raise IndexDirError(
                f"OpenSearch index {index!r} at {url} holds another corpus or other settings "
                f"(built from {(meta.get('source') or {}).get('path', 'a stream')}, k1={meta.get('k1')}, b={meta.get('b')}); "
                "choose another --name, or --replace to delete and rebuild it"
            )
        done = int(meta.get("ingested", 0))
        if meta.get("complete"):
            say(f"index {index!r} at {url} is already complete ({meta.get('passage_count', done):,} passages)")
        elif done:
            say(f"resuming index {index!r} at {url}: {done:,} passages already in")
        return meta
    meta = {"format": INDEX_FORMAT, "format_version": INDEX_FORMAT_VERSION, **settings, "source": source,
            "ingested": 0, "complete": False, "dynrag_version": dynrag.__version__,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    body = index_body(meta, settings["k1"], settings["b"], shards, replicas)
    call(url, index, f"creating index {index!r}", lambda: client.indices.create(index=index, body=body))
    return meta


def _checkpoint(client: Any, url: str, index: str, meta: dict[str, Any]) -> None:
    """Write ``meta`` as the mapping's ``_meta.dynrag`` (a mapping update is acknowledged by the
    cluster once applied, so the checkpoint outlives this process)."""
    call(url, index, "recording progress", lambda: client.indices.put_mapping(index=index, body={"_meta": {"dynrag": meta}}))
