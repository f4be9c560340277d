"""Milvus backend: one collection with a BM25 full-text field and a dense vector field, searched
by BM25, dense or Milvus's own hybrid search (RRFRanker or WeightedRanker).

``uri`` is a local path (milvus-lite, embedded; the default is ``./dynrag.milvus.db``) or any
Milvus server URI (``http://host:19530``). Collection layout:

  row     INT64 primary key (build order)
  pid     VARCHAR   passage id
  title   VARCHAR
  text    VARCHAR   passage text, returned in hits
  body    VARCHAR   title + newline + text, analysed (enable_analyzer) for full-text search
  sparse  SPARSE_FLOAT_VECTOR, filled by Milvus's BM25 Function from ``body``
  dense   FLOAT_VECTOR(dimension of the embedding model; 384 for all-MiniLM-L6-v2), inner product

The analyzer is the standard tokenizer, lower-cased, with bm25s's English stop-word list, plus
an English stemmer filter. milvus-lite 3.x implements the analyzer itself in Python: it applies the
tokenizer (``\\w+``), lower-casing and an explicit stop-word list, and silently ignores the
stemmer filter, so on a local file BM25 matches unstemmed words (a Milvus server stems). Its
BM25 statistics are also per segment. Scores: BM25 hits carry the BM25 score (milvus-lite reports
it as a negative distance; it is turned back into the score), dense hits the inner product (the
cosine; vectors are L2-normalised), hybrid hits the ranker's fused score.

``WeightedRanker(alpha, 1.0)`` is Milvus's weighted fusion: it normalises each list's scores with
its own function (arctan-based), not min-max, so it is close to but not the same as
``dynrag.retrieval.hybrid`` (the paper's min-max formula); ``ranker="rrf"`` is RRF with k=60.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from dynrag.corpus.passage import Passage
from dynrag.errors import ConfigError, DynragError, IndexDirError
from dynrag.retrieval.base import BatchSearch, Hit, without_blank_queries

if TYPE_CHECKING:
    from dynrag.retrieval.embedder import Embedder

DEFAULT_URI = "./dynrag.milvus.db"
DEFAULT_COLLECTION = "dynrag"
Mode = Literal["hybrid", "bm25", "dense"]
MODES = ("hybrid", "bm25", "dense")
Ranker = Literal["rrf", "weighted"]
MAX_VARCHAR = 65535  # bytes, Milvus's VARCHAR limit
_INSERT_BATCH = 512


def _pymilvus() -> Any:
    try:
        import pymilvus
    except ImportError as e:  # pragma: no cover - pymilvus is a dependency
        raise DynragError("the Milvus backend needs pymilvus and milvus-lite: pip install pymilvus milvus-lite") from e
    return pymilvus


def analyzer_params() -> dict[str, Any]:
    from bm25s.stopwords import STOPWORDS_EN

    return {
        "tokenizer": "standard",
        "filter": [
            "lowercase",
            {"type": "stop", "stop_words": sorted(set(STOPWORDS_EN))},
            {"type": "stemmer", "language": "english"},
        ],
    }


def connect(uri: str | Path = DEFAULT_URI) -> Any:
    """A MilvusClient: an embedded milvus-lite database for a local path, else a server."""
    pm = _pymilvus()
    uri = str(uri)
    is_server = "://" in uri
    if not is_server:
        Path(uri).absolute().parent.mkdir(parents=True, exist_ok=True)
    try:
        return pm.MilvusClient(uri)
    except Exception as e:  # pymilvus raises MilvusException, grpc errors, OSError ...
        raise IndexDirError(f"cannot open Milvus at {uri}: {str(e).splitlines()[0]}") from e


class MilvusRetriever(BatchSearch):
    """BM25, dense or hybrid search over one Milvus collection."""

    def __init__(
        self,
        client: Any,
        collection: str,
        embedder: Embedder,
        *,
        uri: str = DEFAULT_URI,
        mode: Mode = "hybrid",
        ranker: Ranker = "rrf",
        alpha: float = 0.3,
        candidates: int = 50,
        rrf_k: int = 60,
    ):
        if mode not in MODES:
            raise ConfigError(f"unknown Milvus search mode {mode!r}; use hybrid, bm25 or dense")
        if ranker not in ("rrf", "weighted"):
            raise ConfigError(f"unknown Milvus ranker {ranker!r}; use rrf or weighted")
        self.client = client
        self.collection = collection
        self.embedder = embedder
        self.uri = uri
        self.mode: Mode = mode
        self.ranker: Ranker = ranker
        self.alpha = float(alpha)
        self.candidates = int(candidates)
        self.rrf_k = int(rrf_k)

    # ---- building -------------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        passages: Iterable[Passage],
        uri: str | Path = DEFAULT_URI,
        collection: str = DEFAULT_COLLECTION,
        embedder: Embedder | None = None,
        *,
        batch_size: int = 64,
        progress: bool = True,
        total: int | None = None,
        **search_options: Any,
    ) -> MilvusRetriever:
        """(Re)create ``collection`` at ``uri`` from a stream of passages and open it for search.

        The collection is filled under a temporary name and renamed over the old one at the end,
        so an interrupted build leaves an existing collection as it was.
        """
        from dynrag.progress import stderr_bar

        pm = _pymilvus()
        if embedder is None:
            from dynrag.retrieval.embedder import Embedder

            embedder = Embedder.load()
        client = connect(uri)
        tmp = f"{collection}__building"
        try:
            if client.has_collection(tmp):
                client.drop_collection(tmp)
            _create(client, pm, tmp, embedder.dimension)
            bar = stderr_bar(total, "Milvus", progress)
            row = 0
            with bar:
                batch: list[Passage] = []
                for p in passages:
                    batch.append(p)
                    if len(batch) == _INSERT_BATCH:
                        row = _insert(client, tmp, batch, row, embedder, batch_size)
                        bar.update(len(batch))
                        batch = []
                if batch:
                    row = _insert(client, tmp, batch, row, embedder, batch_size)
                    bar.update(len(batch))
            if row == 0:
                raise DynragError("nothing to index: the corpus yielded no passages")
            if client.has_collection(collection):
                client.drop_collection(collection)
            client.rename_collection(tmp, collection)
            client.load_collection(collection)
        except BaseException:
            try:
                if client.has_collection(tmp):
                    client.drop_collection(tmp)
            finally:
                client.close()
            raise
        return cls(client, collection, embedder, uri=str(uri), **search_options)

    @classmethod
    def open(
        cls,
        uri: str | Path = DEFAULT_URI,
        collection: str = DEFAULT_COLLECTION,
        embedder: Embedder | None = None,
        **search_options: Any,
    ) -> MilvusRetriever:
        """Open an existing collection (built with ``build``) for search."""
        client = connect(uri)
        if not client.has_collection(collection):
            names = client.list_collections()
            client.close()
            raise IndexDirError(
                f"Milvus at {uri} has no collection {collection!r} (it has: {', '.join(names) or 'none'}); "
                "build it with MilvusRetriever.build"
            )
        info = client.describe_collection(collection)
        fields = {f["name"]: f for f in info.get("fields", [])}
        if not {"pid", "title", "text", "body", "sparse", "dense"} <= fields.keys():
            client.close()
            raise IndexDirError(f"Milvus collection {collection!r} at {uri} was not built by dynrag")
        dim = int(fields["dense"].get("params", {}).get("dim", 0))
        if embedder is None:
            from dynrag.retrieval.embedder import Embedder

            embedder = Embedder.load()
        if dim and embedder.dimension != dim:
            client.close()
            raise DynragError(
                f"Milvus collection {collection!r} holds {dim}-dimensional vectors but the embedding "
                f"model gives {embedder.dimension}; use the model it was built with"
            )
        client.load_collection(collection)
        return cls(client, collection, embedder, uri=str(uri), **search_options)

    # ---- searching ------------------------------------------------------------------------

    def search(self, query: str, k: int, mode: Mode | None = None) -> list[Hit]:  # BatchSearch's, plus mode
        return self.search_batch([query], k, mode)[0]

    def search_batch(self, queries: list[str], k: int, mode: Mode | None = None) -> list[list[Hit]]:
        mode = mode or self.mode
        if mode not in MODES:
            raise ConfigError(f"unknown Milvus search mode {mode!r}; use hybrid, bm25 or dense")
        if not queries or k <= 0:
            return [[] for _ in queries]
        return without_blank_queries(queries, lambda texts: self._search(texts, k, mode))

    def _search(self, queries: list[str], k: int, mode: Mode) -> list[list[Hit]]:
        pm = _pymilvus()
        out_fields = ["pid", "title", "text"]
        if mode == "bm25":
            result = self.client.search(
                self.collection, data=list(queries), anns_field="sparse", limit=k,
                search_params={"metric_type": "BM25"}, output_fields=out_fields,
            )
            # BM25 scores are >= 0; milvus-lite reports -score as the distance. A zero score
            # means no shared term: dropped, as BM25Index does.
            return [[h for h in _hits(r, abs) if h.score > 0] for r in result]
        vectors = self.embedder.encode(list(queries)).tolist()
        if mode == "dense":
            result = self.client.search(
                self.collection, data=vectors, anns_field="dense", limit=k,
                search_params={"metric_type": "IP"}, output_fields=out_fields,
            )
            return [_hits(r, float) for r in result]
        n = max(k, self.candidates)
        reqs = [
            pm.AnnSearchRequest(data=list(queries), anns_field="sparse", param={"metric_type": "BM25"}, limit=n),
            pm.AnnSearchRequest(data=vectors, anns_field="dense", param={"metric_type": "IP"}, limit=n),
        ]
        ranker = pm.RRFRanker(self.rrf_k) if self.ranker == "rrf" else pm.WeightedRanker(self.alpha, 1.0)
        result = self.client.hybrid_search(
            self.collection, reqs, ranker=ranker, limit=k, output_fields=out_fields
        )
        return [_hits(r, float) for r in result]

    def __len__(self) -> int:
        stats = self.client.get_collection_stats(self.collection)
        return int(stats.get("row_count", 0))

    def close(self) -> None:
        self.client.close()


# ---- helpers ----------------------------------------------------------------------------------


def _create(client: Any, pm: Any, name: str, dim: int) -> None:
    DataType = pm.DataType
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("row", DataType.INT64, is_primary=True)
    schema.add_field("pid", DataType.VARCHAR, max_length=MAX_VARCHAR)
    schema.add_field("title", DataType.VARCHAR, max_length=MAX_VARCHAR)
    schema.add_field("text", DataType.VARCHAR, max_length=MAX_VARCHAR)
    schema.add_field(
        "body", DataType.VARCHAR, max_length=MAX_VARCHAR, enable_analyzer=True,
        analyzer_params=analyzer_params(),
    )
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_field("dense", DataType.FLOAT_VECTOR, dim=dim)
    schema.add_function(
        pm.Function(
            name="body_bm25", function_type=pm.FunctionType.BM25,
            input_field_names=["body"], output_field_names=["sparse"],
        )
    )
    index = client.prepare_index_params()
    index.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    index.add_index(field_name="dense", index_type="FLAT", metric_type="IP")
    try:
        client.create_collection(name, schema=schema, index_params=index)
    except Exception as e:
        raise DynragError(f"cannot create Milvus collection {name!r}: {str(e).splitlines()[0]}") from e


def _insert(client: Any, name: str, batch: Sequence[Passage], row: int, embedder: Embedder, batch_size: int) -> int:
    body = [f"{p.title}\n{p.text}" if p.title else p.text for p in batch]
    for p, b in zip(batch, body):
        if len(b.encode("utf-8")) > MAX_VARCHAR or len(p.id.encode("utf-8")) > MAX_VARCHAR:
            raise DynragError(
                f"passage {p.id!r} is longer than Milvus's {MAX_VARCHAR}-byte text limit; "
                "chunk the corpus first (e.g. tokens:200:20)"
            )
    vectors = embedder.encode(body, batch_size=batch_size)
    rows = [
        {"row": row + i, "pid": p.id, "title": p.title, "text": p.text, "body": b, "dense": v.tolist()}
        for i, (p, b, v) in enumerate(zip(batch, body, vectors))
    ]
    client.insert(name, rows)
    return row + len(batch)


def _hits(result: Iterable[dict[str, Any]], score: Any) -> list[Hit]:
    hits = []
    for r in result:
        e = r.get("entity", r)
        hits.append(Hit(str(e["pid"]), str(e.get("title", "")), str(e.get("text", "")), float(score(r["distance"]))))
    return hits
