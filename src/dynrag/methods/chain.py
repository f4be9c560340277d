"""The best-practice retrieval chain (after Wang et al., 2024, "Searching for Best Practices in
Retrieval-Augmented Generation"):

    query classification -> query transform -> retrieval -> rerank -> repack -> compress

Every module is optional and off by default, so a method that uses the chain with default options
retrieves exactly as before (top-k for the question, in the retriever's order) and loads nothing
new. Models (the embedder, the query classifier, a cross-encoder) load on first use only. Each
module that runs adds a Step to the trace (kind = the module's name, details = what it decided
and how long it took), and the Retrieval's reason lists the modules that shaped its hits.

Presets name the paper's recommended configurations (§5 "best practices for implementing RAG");
options given explicitly override a preset's values:

- `balanced` ("balanced efficiency practice": query classification, Hybrid, TILDEv2, Reverse,
  Recomp): classify=true, query_transform=none, rerank=embedding (cheap like TILDEv2: no model
  pass per passage), repack=reverse, compress=extractive.
- `best` ("best performance practice": query classification, Hybrid with HyDE, monoT5, Reverse,
  Recomp): classify=true, query_transform=hyde, rerank=lm (the answering model's own P("yes"),
  pointwise like monoT5), repack=reverse, compress=extractive.

The retrieval module itself (bm25, dense, hybrid with alpha=0.3, milvus) is the retriever the method
is given (`--retriever NAME --retriever-option KEY=VALUE` of `ask` and `eval`), not a chain option;
with a preset and no `--retriever`, the commands build the preset's (PRESET_RETRIEVERS: hybrid).
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from dynrag.context.registry import COMPRESSORS
from dynrag.lm.base import LanguageModel
from dynrag.methods.base import MethodOptions, MethodTraits, ReasoningOptions, Retrieval, Step, Trace
from dynrag.registry import Registry
from dynrag.rerank.registry import RERANKERS
from dynrag.retrieval.base import Hit, Retriever
from dynrag.retrieval.transform_registry import transform_traits

PRESETS: dict[str, dict[str, Any]] = {
    "none": {},
    "balanced": {
        "classify": True,
        "query_transform": "none",
        "rerank": "embedding",
        "repack": "reverse",
        "compress": "extractive",
    },
    "best": {
        "classify": True,
        "query_transform": "hyde",
        "rerank": "lm",
        "repack": "reverse",
        "compress": "extractive",
    },
}

# The retriever of each preset's paper configuration (both name Hybrid search, alpha 0.3). The
# retriever is built by the command, not the chain, so commands look the default up here.
PRESET_RETRIEVERS: dict[str, str] = {"none": "bm25", "balanced": "hybrid", "best": "hybrid"}


def preset_retriever(method_options: Any) -> str:
    """The retriever a command builds when none is named: the chain preset's (``preset=balanced`` /
    ``best`` mean hybrid), else bm25. ``method_options``: a mapping or a validated options model."""
    preset = method_options.get("preset", "none") if isinstance(method_options, dict) else getattr(
        method_options, "preset", "none"
    )
    return PRESET_RETRIEVERS.get(str(preset), "bm25")

DEFAULT_CANDIDATES = 10


class ChainOptions(MethodOptions):
    """Options of the retrieval chain; a method that runs the chain takes these."""

    preset: Literal["none", "balanced", "best"] = "none"
    # Query classification: skip retrieval when p(needs retrieval) < classify_threshold.
    classify: bool = False
    classify_threshold: float = Field(0.5, ge=0.0, le=1.0)
    # Query transform: HyDE searches with the question plus a hypothetical passage.
    query_transform: Literal["none", "hyde"] = "none"
    hyde_max_new_tokens: int = Field(64, ge=1)
    # Rerank `candidates` retrieved passages and keep the best k (a RERANKERS name, or none).
    rerank: str = "none"
    rerank_model: str | None = Field(None, validate_default=True)  # cross-encoder model directory
    candidates: int | None = Field(None, ge=1)  # None: max(10, k)
    # Order of the k passages in the prompt (ranked best first): forward, reverse, sides.
    repack: Literal["forward", "reverse", "sides"] = "forward"
    # Compression of the passages' text (a COMPRESSORS name, or none).
    compress: str = "none"
    compress_budget: int = Field(150, ge=1)  # extractive: words kept over all passages
    compress_ratio: float = Field(0.5, gt=0.0, le=1.0)  # selective: share of words kept
    compress_max_new_tokens: int = Field(96, ge=1)  # abstractive: the summary's length cap
    # Keep the search query's last N tokens of the model's tokenizer (DRAGIN's released code cuts
    # every BM25 query, its baselines' too, to 64); None: no cut.
    max_query_tokens: int | None = Field(None, ge=1, description="keep the query's last N tokens; None: no cut")

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        # Fill in the preset's values for options not given explicitly; dumping and re-parsing the
        # resolved options gives the same options (every value is then explicit).
        if isinstance(data, dict):
            preset = data.get("preset", "none")
            if isinstance(preset, str) and preset in PRESETS:
                data = {**PRESETS[preset], **data}
        return data

    @field_validator("rerank")
    @classmethod
    def _known_reranker(cls, value: str) -> str:
        return _registered(value, RERANKERS)

    @field_validator("compress")
    @classmethod
    def _known_compressor(cls, value: str) -> str:
        return _registered(value, COMPRESSORS)

    @field_validator("rerank_model")
    @classmethod
    def _check_rerank_model(cls, value: str | None, info: ValidationInfo) -> str | None:
        rerank = info.data.get("rerank")
        if rerank == "cross_encoder" and not value:
            raise ValueError("rerank=cross_encoder needs rerank_model=PATH (a sequence-classification model directory)")
        if value and rerank != "cross_encoder":
            raise ValueError("rerank_model applies to rerank=cross_encoder only")
        return value

    @field_validator("candidates")
    @classmethod
    def _check_candidates(cls, value: int | None, info: ValidationInfo) -> int | None:
        k = info.data.get("k")
        if value is not None and info.data.get("rerank", "none") != "none" and k is not None and value < k:
            raise ValueError(f"must be >= k ({k}) when reranking")
        return value

    @property
    def candidate_count(self) -> int:
        """How many passages to retrieve before reranking."""
        return self.candidates if self.candidates is not None else max(DEFAULT_CANDIDATES, self.k)


def _registered(value: str, registry: Registry) -> str:
    if value != "none" and value not in registry:
        raise ValueError(f"unknown {registry.kind} {value!r}; choose one of: none, {', '.join(registry.names())}")
    return value


def _entry_options(registry: Registry, name: str, options: ChainOptions) -> Any:
    """The chain options an entry declares (its option names are the chain's), validated."""
    fields = registry.get(name).options.model_fields
    return registry.parse_options(name, {k: getattr(options, k) for k in fields if k in type(options).model_fields})


class RetrievingMethod:
    """Base of the methods that retrieve: the model, prompt builder, validated options and
    retriever, and the retrieval chain every one of their retrievals goes through. The chain
    loads only what the options need, when the method is built, so bad options fail here."""

    traits: ClassVar[MethodTraits] = MethodTraits()

    def __init__(self, lm: LanguageModel, builder: Any, options: ChainOptions, retriever: Retriever):
        self.lm, self.options, self.retriever = lm, options, retriever
        # deeprag writes its own narrative: only the methods that answer in the project's prompt style it
        self.builder = options.styled(builder) if isinstance(options, ReasoningOptions) else builder
        self.chain = RetrievalChain(lm, retriever, options)
        self.chain.prepare()


class RetrievalChain:
    """Runs the chain for one method; models load lazily and are kept for later questions."""

    def __init__(self, lm: LanguageModel, retriever: Retriever, options: ChainOptions, embedder=None, classifier=None):
        self.lm, self.retriever, self.options = lm, retriever, options
        self._embedder, self._classifier = embedder, classifier
        self._reranker = None
        self._compressor = None
        # A method may resolve the option itself (dragin: by variant) and set this.
        self.max_query_tokens: int | None = options.max_query_tokens

    # -- lazily built parts ---------------------------------------------------------------
    @property
    def embedder(self):
        if self._embedder is None:
            from dynrag.retrieval.embedder import Embedder

            self._embedder = Embedder.load()
        return self._embedder

    @property
    def classifier(self):
        if self._classifier is None:
            from dynrag.classify import QueryClassifier

            self._classifier = QueryClassifier.load(embedder=self.embedder)
        return self._classifier

    @property
    def reranker(self):
        if self._reranker is None:
            self._reranker = self._open(RERANKERS, self.options.rerank)
        return self._reranker

    @property
    def compressor(self):
        if self._compressor is None:
            self._compressor = self._open(COMPRESSORS, self.options.compress)
        return self._compressor

    def _open(self, registry: Registry, name: str) -> Any:
        options = _entry_options(registry, name, self.options)
        return registry.open(name, options, lm=self.lm, embedder=lambda: self.embedder)

    def prepare(self) -> None:
        """Load every model the options need now (so a bad option fails before any question)."""
        o = self.options
        if o.classify:
            self.classifier.check_embedder()
        if o.rerank != "none":
            _ = self.reranker
        if o.compress != "none":
            _ = self.compressor

    # -- the modules ------------------------------------------------------------------------
    def needs_retrieval(self, question: str, trace: Trace) -> bool:
        """Query classification (True when off). Adds a `classify` step saying why."""
        if not self.options.classify:
            return True
        started = time.perf_counter()
        decision = self.classifier.decide(question, self.options.classify_threshold)
        verdict = "retrieve" if decision.needs_retrieval else "answer directly"
        sign = ">=" if decision.needs_retrieval else "<"
        trace.steps.append(Step("classify", "", "", 0, details={
            "decision": verdict,
            "p_needs_retrieval": round(decision.probability, 4),
            "threshold": decision.threshold,
            "reason": f"query classifier: p(needs retrieval) = {decision.probability:.3f} {sign} {decision.threshold}",
            "seconds": round(time.perf_counter() - started, 4),
        }))
        return decision.needs_retrieval

    def retrieve(self, question: str, trace: Trace, position: int = 0, reason: str = "before generation") -> list[Hit]:
        """Query transform, search, rerank, repack, compress: the hits for the prompt. Appends the
        Retrieval (its hits are what the prompt shows) and one Step per module that ran."""
        o = self.options
        notes: list[str] = []
        question = last_tokens(self.lm, question, self.max_query_tokens)
        query = question
        if transform_traits(o.query_transform).single_hyde:
            from dynrag.retrieval.hyde import hypothetical_passage, join_query

            started = time.perf_counter()
            from dynrag.lm.chat import frame_of

            # A chat model writes its passage inside its own template, as it reads every other prompt.
            passage, decoded = hypothetical_passage(self.lm, question, o.hyde_max_new_tokens, frame_of(self.lm))
            query = join_query(question, passage)
            trace.steps.append(Step("hyde", passage, "", decoded, kept_tokens=0, details={
                "query": query, "seconds": round(time.perf_counter() - started, 4),
            }))
            notes.append("HyDE query")

        fetch = o.candidate_count if o.rerank != "none" else o.k
        hits = self.retriever.search(query, fetch)

        if o.rerank != "none":
            started = time.perf_counter()
            rescored = self.reranker.rerank(question, hits, len(hits))  # every candidate's score, for the trace
            reranked = rescored[: o.k]
            new_scores = {h.id: h.score for h in rescored}
            trace.steps.append(Step("rerank", "", "", 0, details={
                "reranker": o.rerank,
                "candidates": [
                    {"id": h.id, "title": h.title, "retrieval_rank": i + 1, "retrieval_score": float(h.score),
                     "rerank_score": new_scores.get(h.id)}
                    for i, h in enumerate(hits)
                ],
                "kept": [h.id for h in reranked],
                "seconds": round(time.perf_counter() - started, 4),
            }))
            notes.append(f"reranked by {o.rerank}, {len(hits)} -> {len(reranked)}")
            hits = reranked
        else:
            hits = hits[: o.k]

        if o.repack != "forward":
            from dynrag.context.repack import repack

            hits = repack(hits, o.repack)
            trace.steps.append(Step("repack", "", "", 0, details={"order": o.repack, "ids": [h.id for h in hits]}))
            notes.append(f"{o.repack} order")

        if o.compress != "none" and hits:
            started = time.perf_counter()
            hits, details = self.compressor.compress(question, hits)
            details["seconds"] = round(time.perf_counter() - started, 4)
            trace.steps.append(Step("compress", "", "", 0, details=details))
            notes.append(f"{o.compress} compression, {details['words_before']} -> {details['words_after']} words")

        full_reason = reason + (f" ({'; '.join(notes)})" if notes else "")
        trace.retrievals.append(Retrieval(query=query, hits=hits, position=position, reason=full_reason))
        return hits


def last_tokens(lm: Any, text: str, n: int | None) -> str:
    """``text`` cut to its last ``n`` tokens of the model's tokenizer, as the DRAGIN authors cut every
    BM25 query (to 64); a backend without a tokenizer (an HTTP server) keeps the last ``n`` words."""
    if n is None:
        return text
    if not getattr(getattr(lm, "capabilities", None), "attention_pass", False):
        words = text.split()
        return text if len(words) <= n else " ".join(words[-n:])
    ids = lm.encode(text)
    return text if len(ids) <= n else lm.decode(ids[-n:]).strip()
