"""The run plan: what one command will run, decided and checked once, before anything loads or is
written.

``make_plan(config, command=...)`` turns a ``RunConfig`` (flags, a ``--config`` file, or a server's
settings) into a frozen ``RunPlan``: the parsed ``ModelSpec``, the method's registry name with its
validated options and traits, the retriever choice (the chain preset's when none is named, for
every command), the benchmark, limits and how to execute. Every command makes its plan here, so
``ask``, ``serve`` and ``eval`` cannot disagree on the same configuration, and a bad input fails
in one line naming its flag or key. ``assemble.py`` builds the objects a plan names.

A plan is plain data (names, paths, pydantic options) and pickles, so a worker process can be
handed one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from dynrag.config import RunConfig, require, section_options
from dynrag.errors import ConfigError
from dynrag.lm.spec import ModelSpec
from dynrag.methods.base import MethodOptions, MethodTraits
from dynrag.retrieval.base import RetrieverTraits
from dynrag.retrieval.transform_registry import HYDE_TRANSFORM, transform_traits
from dynrag.run.checks import DatasetPlan, check_dataset, corpus_identity, server_corpus_sha256

Command = Literal["ask", "serve", "eval", "eval-retrieval"]
DEFAULT_METHOD = "single"
DEFAULT_RETRIEVER = "bm25"  # eval-retrieval, synthesis and GRPO when no --retriever is given


@dataclass(frozen=True)
class MethodPlan:
    name: str
    options: MethodOptions  # validated, defaults filled in

    @property
    def traits(self) -> MethodTraits:
        from dynrag.methods.registry import method_traits

        return method_traits(self.name)


@dataclass(frozen=True)
class RetrieverPlan:
    """Which retriever searches what. ``index``: the index directory to open (None: a search
    server, or for eval the pooled contexts built into the run directory); ``corpus`` and
    ``corpus_sha256``: what an eval run records of it."""

    name: str
    options: dict[str, Any]  # as given, validated and typed, defaults left out (as a run records them)
    index: Path | None = None
    corpus: str | None = None  # eval, eval-retrieval: "contexts", an index directory, or None (a server)
    corpus_sha256: str | None = None

    @property
    def traits(self) -> RetrieverTraits:
        from dynrag.retrieval.factory import retriever_traits

        return retriever_traits(self.name)

    def open_options(self) -> dict[str, Any]:
        """The options to open it with: BM25 parts on bm25s's numpy backend unless one was chosen."""
        from dynrag.retrieval.factory import with_numpy_bm25

        return with_numpy_bm25(self.name, self.options)


@dataclass(frozen=True)
class Execution:
    """How an eval run answers (not part of its identity: a run may resume with other values)."""

    workers: int | str = "auto"
    dask: str | None = None
    concurrency: int = 1
    batch: int = 1  # questions in flight in this process, one model, generations batched


@dataclass(frozen=True)
class RetrievalEval:
    """`eval-retrieval`'s own settings."""

    cutoffs: tuple[int, ...] = (3, 10)
    query_transform: str = "none"  # retrieval/query_transforms.py: none, hyde, hyde-only, hyde-multi, rewrite, decompose
    hyde_cache: Path | None = None  # the file of the transform's texts (any transform's, despite its name)
    hyde_max_new_tokens: int = 64
    hyde_documents: int = 3  # hyde-multi's passages

    @property
    def hyde(self) -> bool:
        """Whether the questions are searched with one HyDE passage each (the old ``--hyde``)."""
        return transform_traits(self.query_transform).single_hyde


@dataclass(frozen=True)
class RunPlan:
    command: Command
    model: ModelSpec
    exemplars: str = "default"
    method: MethodPlan | None = None  # None: eval-retrieval, which runs no method
    retriever: RetrieverPlan | None = None  # None: the method does not retrieve
    dataset: DatasetPlan | None = None
    out: Path | None = None
    baseline: Path | None = None
    scorer: str = "squad"
    execution: Execution = field(default_factory=Execution)
    retrieval_eval: RetrievalEval | None = None


def make_plan(config: RunConfig, *, command: Command) -> RunPlan:
    """The plan for ``command`` from ``config``; every check runs here, once."""
    if command == "eval-retrieval":
        return _retrieval_eval_plan(config)
    if command == "eval":
        require(config, "dataset", "data", "method", "out")
    model = _model(config.model)
    method = _method(config)
    dataset = check_dataset(config, sha256=True) if command == "eval" else None
    if dataset is not None:  # defaults that depend on the dataset (deeprag's limits) are settled here, once
        from dynrag.datasets.formats.registry import dataset_spec

        method = MethodPlan(method.name, method.options.for_dataset(dataset_spec(dataset.name)))
    exemplars = config.exemplars or (dataset.exemplar_style if dataset else "default")
    _check_exemplars(exemplars)
    retriever = _retriever(config, method, command)
    if command != "eval":
        return RunPlan(command, model, exemplars, method, retriever)
    from dynrag.run.checks import check_execution
    from dynrag.datasets.metrics import SCORERS
    from dynrag.io.rundir import check_run_dir

    SCORERS.get(config.scorer)  # an unknown scorer fails now, naming the choices
    execution = Execution(config.workers if config.workers is not None else "auto", config.dask, config.concurrency,
                          config.batch if config.batch is not None else 1)
    check_execution(workers=execution.workers, dask=execution.dask, concurrency=execution.concurrency,
                    batch=execution.batch)
    check_run_dir(Path(config.out), "eval")
    return RunPlan(command, model, exemplars, method, retriever, dataset, Path(config.out), config.baseline,
                   config.scorer, execution)


def _model(spec: str) -> ModelSpec:
    from dynrag.lm.loader import check_spec

    return check_spec(ModelSpec.parse(spec))  # a typo fails before an index is opened or a dense part built


def _method(config: RunConfig) -> MethodPlan:
    name = config.method or DEFAULT_METHOD
    return MethodPlan(name, section_options(config, "options", name))


def _check_exemplars(style: str) -> None:
    from dynrag.methods.prompting import PromptBuilder

    PromptBuilder.for_dataset(style)  # an unknown style fails now, not after loading the model


def _retriever(config: RunConfig, method: MethodPlan, command: Command) -> RetrieverPlan | None:
    from dynrag.methods.chain import preset_retriever

    # A server answers with any method a request names, so it always opens its retriever.
    if command != "serve" and not method.traits.needs_retrieval:
        if config.retriever or config.retriever_options:
            raise ConfigError(f"--retriever/--retriever-option: method {method.name!r} does not retrieve")
        if command == "eval" and config.corpus:
            # Unused here, but `reproduce` hands every row the table's corpus, so it is allowed; a
            # typo still fails rather than pass unnoticed until a retrieving method meets it.
            corpus_identity(config.corpus)
        return None
    name = config.retriever or preset_retriever(method.options)
    options = _retriever_options(name, config)
    needs_index = RetrieverPlan(name, options).traits.needs_index
    if command == "eval":
        return _eval_corpus(config, name, options, needs_index, method.name)
    if command == "ask" and needs_index and config.index is None:
        raise ConfigError(f"method {method.name!r} retrieves: pass --corpus DIR (build one with `dynrag index`)")
    return RetrieverPlan(name, options, config.index if needs_index else None)


def search_retriever(name: str | None, given: Mapping[str, Any], flag: str = "--retriever-option") -> RetrieverPlan:
    """The retriever of a job that searches outside a run's question loop (DeepRAG's tree search,
    GRPO's rollouts): the default name when none is given, and the options checked and typed as a
    run's are, errors naming ``flag``. The job opens it over the index it builds or is given."""
    from dynrag.retrieval.factory import given_options

    chosen = name or DEFAULT_RETRIEVER
    return RetrieverPlan(chosen, given_options(chosen, given, flag))


def _retriever_options(name: str, config: RunConfig) -> dict[str, Any]:
    """As given, typed, defaults left out: what a run records."""
    return section_options(config, "retriever_options", name).model_dump(exclude_unset=True)


def _eval_corpus(config: RunConfig, name: str, options: dict[str, Any], needs_index: bool, method: str) -> RetrieverPlan:
    if not needs_index:
        if config.corpus:  # the server's index is the corpus
            raise ConfigError(f"--corpus: retriever {name!r} searches its server's index; drop --corpus")
        return RetrieverPlan(name, options, None, None, server_corpus_sha256(name, options))
    if not config.corpus:
        raise ConfigError(f"method {method!r} retrieves: pass --corpus contexts or --corpus INDEX_DIR")
    index, corpus, sha = corpus_identity(config.corpus)
    return RetrieverPlan(name, options, index, corpus, sha)


def _retrieval_eval_plan(config: RunConfig) -> RunPlan:
    require(config, "dataset", "data", "out")
    name = config.retriever or DEFAULT_RETRIEVER
    options = _retriever_options(name, config)
    if RetrieverPlan(name, options).traits.needs_index:
        index, _, _ = corpus_identity(config.corpus or "contexts")  # a bad --corpus fails before the questions are read
        retriever = RetrieverPlan(name, options, index, config.corpus or "contexts")
    elif config.corpus:
        raise ConfigError(f"--corpus: retriever {name!r} searches its server's index; drop --corpus")
    else:
        retriever = RetrieverPlan(name, options)
    if config.shard is not None:
        raise ConfigError(f"--shard {config.shard}: eval-retrieval scores every question in one run; shards are for eval")
    dataset = check_dataset(config, sha256=False)
    from dynrag.io.rundir import check_run_dir

    check_run_dir(Path(config.out), "eval-retrieval")
    transform = _query_transform(config)
    model = _model(config.model) if transform_traits(transform).writes_text else ModelSpec.parse(config.model)
    settings = RetrievalEval(tuple(config.cutoffs), transform, config.hyde_cache, config.hyde_max_new_tokens,
                             config.hyde_documents)
    return RunPlan("eval-retrieval", model, retriever=retriever, dataset=dataset, out=Path(config.out),
                   retrieval_eval=settings)


def _query_transform(config: RunConfig) -> str:
    """eval-retrieval's query transform: ``query_transform``, or ``hyde`` for the older ``hyde: true``."""
    from dynrag.retrieval.query_transforms import check_transform

    transform = config.query_transform
    check_transform(transform, config.hyde_documents)
    if config.hyde:
        if transform_traits(transform).writes_text and not transform_traits(transform).single_hyde:
            raise ConfigError(f"--hyde is --query-transform {HYDE_TRANSFORM}, which conflicts with --query-transform "
                              f"{transform}: drop one (or `hyde:` / `query_transform:` in --config)")
        transform = HYDE_TRANSFORM
    if not transform_traits(transform).writes_text and config.hyde_cache is not None:
        raise ConfigError("--hyde-cache applies to a query transform that writes text: add --hyde or "
                          "--query-transform NAME (or drop `hyde_cache:` from --config)")
    return transform


def plan_from_saved(config: dict[str, Any]) -> RunPlan:
    """The plan an eval run's config.json records, for a worker that rebuilds the run's method:
    nothing is checked again (the coordinator did, before the run was written)."""
    from dynrag.methods.registry import parse_options

    method = MethodPlan(config["method"], parse_options(config["method"], config.get("options") or {}))
    return RunPlan("eval", ModelSpec.parse(config["model"]), config.get("exemplars") or "default", method,
                   saved_retriever(config))


def saved_retriever(config: dict[str, Any]) -> RetrieverPlan | None:
    """The retriever an eval run's config.json records (None: its method does not retrieve)."""
    if not config.get("retriever"):
        return None
    corpus = config.get("corpus")
    index = Path(corpus) if corpus and corpus != "contexts" else None
    return RetrieverPlan(config["retriever"], dict(config.get("retriever_options") or {}), index, corpus,
                         config.get("corpus_sha256"))


__all__ = [
    "Command", "DatasetPlan", "Execution", "MethodPlan", "RetrievalEval", "RetrieverPlan", "RunPlan",
    "make_plan", "plan_from_saved", "saved_retriever", "search_retriever",
]
