"""The retriever registry: every retriever by name, with its typed options and how to open it.

Used by `dynrag ask`, `dynrag eval`, `dynrag serve` and `dynrag eval-retrieval` (``--retriever
NAME --retriever-option KEY=VALUE``, planned by ``dynrag.run.plan``), so every command picks its
retriever the same way, and their help and "unknown retriever" errors list ``RETRIEVERS``. An entry's opener is called as
``opener(options, index_dir, *, work_dir, progress)``; ``index_dir`` is the ``dynrag index``
directory, or None for a retriever that keeps its passages elsewhere (a search server); what a caller
may ask of a retriever before opening it is its entry's ``RetrieverTraits``. The dense
part (``INDEX/dense``) and the Milvus collection are built from the index's passages on first use
and reused afterwards. Adding a retriever: its module, an Options model and one entry here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from dynrag.errors import ConfigError, DynragError
from dynrag.lm.device import check_device
from dynrag.registry import Options, Registry, parse_pairs
from dynrag.retrieval.base import Retriever, RetrieverTraits
from dynrag.retrieval.embedding_models import check_embedding_spec
from dynrag.retrieval.hybrid import DEFAULT_ALPHA

RETRIEVERS: Registry[Retriever] = Registry("retriever")

BM25Backend = Literal["auto", "numba", "numpy"]
DenseBackend = Literal["auto", "numpy", "faiss"]


class RetrieverOptions(Options):
    """Base of every retriever's options."""


class BM25Options(RetrieverOptions):
    backend: BM25Backend = "auto"


class EmbeddingOptions(RetrieverOptions):
    # packaged:NAME (retrieval/embedding_models.py) or a sentence-embedding model directory; None:
    # the packaged all-MiniLM-L6-v2
    embedding_model: str | None = None
    batch_size: int = Field(64, ge=1)
    device: str = "auto"  # where the embedding model runs: auto, cpu, cuda, cuda:N, mps

    @field_validator("embedding_model")
    @classmethod
    def _embedding_model(cls, value: str | None) -> str | None:
        return check_embedding_spec(value)  # an unknown packaged: name fails while options are parsed

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        return check_device(value)


class DenseOptions(EmbeddingOptions):
    backend: DenseBackend = "auto"


class HybridOptions(EmbeddingOptions):
    alpha: float = Field(DEFAULT_ALPHA, ge=0.0)
    fusion: Literal["minmax", "rrf"] = "minmax"
    candidates: int = Field(50, ge=1)
    bm25_backend: BM25Backend = "auto"
    dense_backend: DenseBackend = "auto"


class MilvusOptions(EmbeddingOptions):
    mode: Literal["hybrid", "bm25", "dense"] = "hybrid"
    ranker: Literal["rrf", "weighted"] = "rrf"
    alpha: float = Field(DEFAULT_ALPHA, ge=0.0)
    candidates: int = Field(50, ge=1)
    uri: str | None = None  # default: WORK_DIR/milvus.db (milvus-lite); or a Milvus server URI
    collection: str | None = None  # default: dynrag_<corpus checksum>


class OpenSearchOptions(RetrieverOptions):
    url: str = "http://127.0.0.1:9200"
    index: str = "dynrag"
    timeout: float = Field(60.0, gt=0)
    verify_certs: bool = True  # https only
    ca_certs: str | None = None  # a CA bundle for https
    title_field: str = "title"  # another index's field names (DRAGIN's index: text_field=txt)
    text_field: str = "text"


def retriever_traits(name: str) -> RetrieverTraits:
    """What retriever ``name`` needs (unknown names list the choices)."""
    return RETRIEVERS.get(name).traits or RetrieverTraits()


def needs_index(name: str) -> bool:
    """Whether retriever ``name`` searches a ``dynrag index`` directory (else a search server)."""
    return retriever_traits(name).needs_index


def _require_index(name: str, index_dir: Path | None) -> Path:
    if index_dir is None:
        raise ConfigError(f"retriever {name!r} searches an index directory: pass --corpus DIR")
    return Path(index_dir)


@RETRIEVERS.register("bm25", BM25Options, summary="BM25 (bm25s) over the index",
                     traits=RetrieverTraits(bm25_backend_key="backend"))
def open_bm25(options: BM25Options, index_dir: Path | None, *, work_dir: Path, progress: bool) -> Retriever:
    from dynrag.retrieval.bm25 import BM25Index

    return BM25Index.load(_require_index("bm25", index_dir), backend=options.backend)


@RETRIEVERS.register("dense", DenseOptions, summary="exact dense search; INDEX/dense built on first use",
                     traits=RetrieverTraits())
def open_dense(options: DenseOptions, index_dir: Path | None, *, work_dir: Path, progress: bool) -> Retriever:
    return _dense(_require_index("dense", index_dir), _embedder(options), options.backend, options.batch_size, progress)


@RETRIEVERS.register("hybrid", HybridOptions, summary="min-max alpha*BM25 + dense (or RRF)",
                     traits=RetrieverTraits(bm25_backend_key="bm25_backend"))
def open_hybrid(options: HybridOptions, index_dir: Path | None, *, work_dir: Path, progress: bool) -> Retriever:
    from dynrag.retrieval.bm25 import BM25Index
    from dynrag.retrieval.hybrid import HybridRetriever

    index_dir = _require_index("hybrid", index_dir)
    dense = _dense(index_dir, _embedder(options), options.dense_backend, options.batch_size, progress)
    bm25 = BM25Index.load(index_dir, backend=options.bm25_backend)
    return HybridRetriever(bm25, dense, alpha=options.alpha, fusion=options.fusion, candidates=options.candidates)


@RETRIEVERS.register("milvus", MilvusOptions, summary="Milvus (milvus-lite file or server): BM25, dense or hybrid",
                     traits=RetrieverTraits())
def open_milvus(options: MilvusOptions, index_dir: Path | None, *, work_dir: Path, progress: bool) -> Retriever:
    from dynrag.retrieval.bm25 import BM25Index
    from dynrag.retrieval.embedder import Embedder
    from dynrag.retrieval.milvus import MilvusRetriever

    search = {"mode": options.mode, "ranker": options.ranker, "alpha": options.alpha,
              "candidates": options.candidates}
    embedder = _embedder(options) or Embedder.load()
    with BM25Index.load(_require_index("milvus", index_dir), backend="numpy") as bm25:
        sha, count = bm25.manifest["corpus_sha256"], len(bm25)
        uri = options.uri or str(Path(work_dir) / "milvus.db")
        collection = options.collection or f"dynrag_{sha[:16]}"
        try:
            retriever = MilvusRetriever.open(uri, collection, embedder, **search)
            if len(retriever) == count:
                return retriever
            retriever.close()
        except DynragError:
            pass
        return MilvusRetriever.build(
            (bm25.passage(i) for i in range(count)), uri, collection, embedder,
            batch_size=options.batch_size, progress=progress, total=count, **search,
        )


@RETRIEVERS.register("opensearch", OpenSearchOptions, summary="BM25 in an OpenSearch index (url, index)",
                     traits=RetrieverTraits(needs_index=False))
def open_opensearch(options: OpenSearchOptions, index_dir: Path | None, *, work_dir: Path, progress: bool) -> Retriever:
    from dynrag.retrieval.opensearch import OpenSearchRetriever

    return OpenSearchRetriever.open(options.url, options.index, title_field=options.title_field,
                                    text_field=options.text_field, timeout=options.timeout,
                                    verify_certs=options.verify_certs, ca_certs=options.ca_certs)


def given_options(retriever: str, values: Mapping[str, Any], flag: str = "--option") -> dict[str, Any]:
    """The options given for ``retriever``, validated and typed, defaults left out (as a run's
    config records them); errors name ``flag``, the retriever and the valid keys."""
    return RETRIEVERS.parse_options(retriever, values, flag=flag).model_dump(exclude_unset=True)


def parse_retriever_options(retriever: str, pairs: Sequence[str], flag: str = "--option") -> dict[str, Any]:
    """``["alpha=0.3", ...]`` from the command line -> ``given_options``."""
    return given_options(retriever, parse_pairs(pairs, flag), flag)


def open_retriever(
    name: str,
    index_dir: Path | None,
    options: Mapping[str, Any] | Options | None = None,
    *,
    work_dir: Path,
    progress: bool = True,
) -> Retriever:
    """The retriever ``name`` over ``index_dir`` (see the module doc). Over a small-to-big index
    it searches the small chunks and returns their large chunks."""
    from dynrag.retrieval.small_to_big import SmallToBigRetriever, is_small_to_big, load_parents
    from dynrag.retrieval.manifest import read_manifest

    RETRIEVERS.get(name)  # an unknown name fails before the index is read
    small_to_big = index_dir is not None and Path(index_dir).is_dir() and is_small_to_big(read_manifest(index_dir))
    parents = load_parents(index_dir) if small_to_big else None  # a missing file fails before any embedding
    retriever = RETRIEVERS.open(name, options, index_dir, work_dir=Path(work_dir), progress=progress)
    return SmallToBigRetriever(retriever, parents) if parents is not None else retriever


def with_numpy_bm25(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with the BM25 part on the numpy backend unless the user chose one: numba's JIT
    costs 6-12 s per process, more than it saves when each question then spends seconds generating."""
    key = retriever_traits(name).bm25_backend_key
    return {key: "numpy", **options} if key else dict(options)


def option_help() -> str:
    """Every retriever's options with their defaults, for --help."""
    parts = []
    for entry in RETRIEVERS:
        fields = entry.options.model_fields
        keys = ", ".join(f"{k} ({fields[k].default})" if fields[k].default is not None else k for k in fields)
        parts.append(f"{entry.name}: {keys}")
    return ". ".join(parts) + "."


def _embedder(options: EmbeddingOptions) -> Any:
    if options.embedding_model is None:
        return None
    from dynrag.retrieval.embedder import Embedder

    return Embedder.load(options.embedding_model, device=options.device)


def _dense(index_dir: Path, embedder: Any, backend: Any, batch_size: int, progress: bool) -> Any:
    """The dense part of ``index_dir``, (re)built when missing, stale or made by another model."""
    from dynrag.retrieval.dense import DenseIndex

    try:
        dense = DenseIndex.load(index_dir, embedder, backend=backend)
        if embedder is None or dense.manifest["embedding_model"] == embedder.name:
            dense.batch_size = batch_size
            return dense
        dense.close()
    except DynragError:  # missing, stale, or built by a model of another dimension: rebuild
        pass
    if embedder is None:
        from dynrag.retrieval.embedder import Embedder

        embedder = Embedder.load()
    DenseIndex.build_alongside(index_dir, embedder, batch_size=batch_size, progress=progress)
    dense = DenseIndex.load(index_dir, embedder, backend=backend)
    dense.batch_size = batch_size
    return dense
