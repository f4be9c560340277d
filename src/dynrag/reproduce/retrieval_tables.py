"""What a retrieval-only paper table is: rows that each search one corpus with one retriever (and a
query transform), scored on the questions' supporting passages, beside the paper's published cells.

The best-practices paper compares most pipeline steps by retrieval quality alone (embedding
models, chunking, query transforms, hybrid α). Such a table never runs a reader, so its rows are
`dynrag eval-retrieval` runs; ``retrieval_runs.py`` runs them and renders the table. The scoring
below is pure: a hit "covers" the gold passages it contains (itself, or for a chunk of a document,
the passages at least half inside the chunk), and every metric counts covered gold passages.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from dynrag.registry import Options, Registry
from dynrag.reproduce.claims import Claim


@dataclass(frozen=True)
class CorpusShape:
    """What the rows of a table search: each dataset's pooled context paragraphs as they are, or
    each question's paragraphs joined into one document and then chunked (`chunk`, the forms of
    ``dynrag index --chunk``), and the embedding model of the dense part."""

    chunk: str = "none"
    documents: bool = False  # join each question's paragraphs into one document before chunking
    embedding_model: str | None = None  # None: the packaged default

    def key(self) -> str:
        # The packaged default named explicitly is the default: one corpus and one dense part for both.
        default = self.embedding_model in (None, "packaged:all-minilm-l6-v2")
        model = "default" if default else str(self.embedding_model).replace("/", "-").replace(":", "-")
        return f"{'docs' if self.documents else 'paragraphs'}_{self.chunk.replace(':', '-')}_{model}"


@dataclass(frozen=True)
class RetrievalRow:
    key: str  # the row's key in the published cells (when the paper has the row) and its directory
    label: str
    retriever: str = "bm25"
    options: dict[str, Any] = field(default_factory=dict)  # the retriever's options
    corpus: CorpusShape = CorpusShape()
    query_transform: str = "none"  # eval-retrieval's --query-transform
    transform_options: dict[str, Any] = field(default_factory=dict)  # e.g. hyde_documents
    x: float | None = None  # the row's place on the table's swept axis (its plot)
    rerank: str = "none"  # a reranker of the chain: reorders `first_stage`'s top `candidates` (rerank_rows.py)
    candidates: int = 20
    first_stage: str | None = None  # the key of the row whose ranking is reranked


@dataclass(frozen=True)
class Metric:
    title: str  # as the paper names it
    key: str | None  # ours: "mrr@K", "r@K", "ndcg@K", "map", "words@K" (mean words in the top K hits); None: paper only
    paper: str | None = None  # the published cells' key, when the paper reports it
    scale: float = 100.0  # the paper prints percentages
    digits: int = 1
    paper_title: str | None = None  # the published column's title, when it is not ``title``
    reader: bool = False  # an answer figure of the reader's eval run ("em", "f1"), not a ranking one


@dataclass(frozen=True)
class Sweep:
    """A table whose rows sweep one setting: its plot (``metric`` against each row's ``x``)."""

    axis: str
    metrics: tuple[str, ...]
    log_x: bool = False
    over_cutoffs: bool = False  # x is each metric's cut-off K (one line per row), not the row's x


@dataclass
class RetrievalTable:
    name: str
    title: str
    datasets: list[str]  # ours, by --data-dir file (the dataset's default_files, or reproduce's JSONL_FILES)
    rows: list[RetrievalRow]
    metrics: list[Metric]
    published: dict[str, dict[str, dict[str, float]]]  # the paper's dataset -> row key -> metric -> value
    paper_setting: str  # one line: what the published cells were measured on
    stand_in: str  # one line: which of our datasets stands in for which of the paper's
    source: str
    sweep: Sweep | None = None
    needs_model: bool = False  # some row's query transform writes text with --model
    remarks: list[str] = field(default_factory=list)
    published_labels: dict[str, str] = field(default_factory=dict)  # a published row's name, when no row of ours has its key

    reads: bool = False  # `--option reader=true` also has the reader answer from each row's top hits
    claims: list[Claim] = field(default_factory=list)  # the paper's claims, each decided per dataset (claims.py)
    # Questions per dataset when --limit is not given: rows where the model writes for every
    # question (HyDE, rewriting, LM reranking) would take an hour on two cores over every question.
    default_limit: int | None = None

    def ours(self, reading: bool = True) -> list[Metric]:
        """The metrics we compute (the rest are the paper's only); the reader's only when it read."""
        return [m for m in self.metrics if m.key and (reading or not m.reader)]

    @property
    def depth(self) -> int:
        """How many hits each question's search keeps: the deepest cut-off any metric reads."""
        cutoffs = [int(m.key.split("@")[1]) for m in self.ours() if "@" in (m.key or "")]
        return max([10, *cutoffs])


class RetrievalTableOptions(Options):
    """Every retrieval table's `--option`s."""

    distractors: str | None = Field(
        None, description="a passages JSONL (e.g. the 21k-passage Wikipedia corpus) pooled in beside each dataset's paragraphs"
    )
    reader: bool = Field(False, description="chunking tables: the reader (--model, `single`) also answers from each row's top hits")
    reader_k: int = Field(3, ge=1, description="hits the reader reads")


RETRIEVAL_TABLES: Registry[Callable[..., RetrievalTable]] = Registry("retrieval table")


# ---- scoring (pure) -------------------------------------------------------------------------------


def covered_within(span: tuple[int, int], parts: dict[str, tuple[int, int]]) -> set[str]:
    """The parts (word spans of a document) at least half of whose words lie inside ``span``."""
    start, end = span
    covered = set()
    for part, (p_start, p_end) in parts.items():
        inside = max(0, min(end, p_end) - max(start, p_start))
        if p_end > p_start and inside * 2 >= p_end - p_start:
            covered.add(part)
    return covered


def chunk_span(chunk_id: str, document_words: int, size: int, overlap: int) -> tuple[str, tuple[int, int]]:
    """(document id, word span) of a chunk that ``chunk_by_tokens(document, size, overlap)`` made:
    chunk n starts at n·(size − overlap); an id without "#n" is a document that fit in one chunk."""
    document, sep, number = chunk_id.rpartition("#")
    if not sep or not number.isdigit():
        return chunk_id, (0, document_words)
    start = int(number) * (size - overlap)
    return document, (start, min(start + size, document_words))


def first_cover_ranks(covers: Sequence[set[str]], gold: Iterable[str]) -> dict[str, int]:
    """Gold id -> the 1-based rank of the first hit covering it (gold never covered: absent)."""
    gold_set, ranks = set(gold), {}
    for rank, covered in enumerate(covers, start=1):
        for pid in covered & gold_set:
            ranks.setdefault(pid, rank)
    return ranks


def ranking_scores(covers: Sequence[set[str]], gold: Sequence[str], words: Sequence[int], keys: Iterable[str]) -> dict[str, float]:
    """One question's figures: ``r@K`` (share of gold covered by the top K), ``mrr@K`` (1 / rank of
    the first hit covering any gold, within K), ``ndcg@K`` and ``map`` (binary relevance, each gold
    passage counted at the rank of its first covering hit), ``hit@K`` (1 when any gold is covered
    within K), ``words@K`` (words in the top K hits)."""
    gold_set = set(gold)
    if not gold_set:
        raise ValueError("a ranking is scored against at least one gold passage")
    ranks = first_cover_ranks(covers, gold_set)
    out: dict[str, float] = {}
    for key in keys:
        name, _, cut = key.partition("@")
        k = int(cut) if cut else len(covers)
        found = sorted(r for r in ranks.values() if r <= k)
        if name == "r":
            out[key] = len(found) / len(gold_set)
        elif name == "hit":
            out[key] = 1.0 if found else 0.0
        elif name == "mrr":
            out[key] = 1.0 / found[0] if found else 0.0
        elif name == "ndcg":
            ideal = sum(1.0 / math.log2(r + 1) for r in range(1, min(len(gold_set), k) + 1))
            out[key] = min(1.0, sum(1.0 / math.log2(r + 1) for r in found) / ideal)
        elif name == "map":
            out[key] = sum((i + 1) / r for i, r in enumerate(found)) / len(gold_set)
        elif name == "words":
            out[key] = float(sum(words[:k]))
        else:
            raise ValueError(f"unknown ranking metric {key!r}")
    return out


def mean_scores(per_question: Sequence[dict[str, float]]) -> dict[str, float]:
    if not per_question:
        return {}
    return {key: sum(q[key] for q in per_question) / len(per_question) for key in per_question[0]}
