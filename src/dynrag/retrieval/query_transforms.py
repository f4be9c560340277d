"""Query transforms for retrieval-only evaluation: what is searched instead of the bare question.

- ``hyde``: the question followed by one hypothetical passage the model writes (retrieval/hyde.py);
- ``hyde-only``: that passage alone;
- ``hyde-multi``: the question followed by N passages; the first is the greedy one (shared with
  ``hyde``), the others are drawn (temperature 0.7, top-p 0.95, each seeded by its question and its
  number, so a rerun writes the same ones);
- ``rewrite``: a one-line search query the model writes for the question;
- ``decompose``: one to three sub-questions the model writes; each is searched, and their rankings
  are fused into one (``fuse_rankings``).

Each is an entry of ``QUERY_TRANSFORMS`` (retrieval/transform_registry.py: its prompt, how its
texts become the query, its traits). Every text comes through a ``QueryTexts`` (retrieval/hyde_cache.py), so it is written once and
read back from the cache file after. ``QueryTransformer.queries`` maps questions to what is
searched: a string per question, or (decompose) a list of strings whose rankings are fused.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from dynrag.errors import ConfigError
from dynrag.retrieval.hyde_cache import TEMPERATURE, TOP_P, QueryTexts
from dynrag.retrieval.query_prompts import QueryPrompt, can_sample
from dynrag.retrieval.transform_registry import QUERY_TRANSFORMS, transform_traits

RRF_K = 60  # as in hybrid retrieval's RRF (Cormack et al., 2009)


def fuse_rankings(rankings: Sequence[Sequence[str]], depth: int | None = None, k: int = RRF_K) -> list[str]:
    """Reciprocal-rank fusion of several rankings of ids: an id scores ``sum 1 / (k + rank)`` over
    the rankings it is in (rank from 1; only its best rank within one ranking counts), best first,
    cut to ``depth``. Ties go to the better best rank, then to the earlier ranking.

    Why RRF: it reads ranks only (the scores of different queries are not on one scale), a
    passage that several sub-questions find rises above one that a single sub-question finds
    (the bridge passage of a multi-hop question), and rankings with no id in common come out
    interleaved round-robin (the rank-r ids of all rankings tie, and go in ranking order), so each
    sub-question's best hits reach the top K. Exact fractions: equal sums tie exactly."""
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    score: dict[str, Fraction] = {}
    best: dict[str, tuple[int, int]] = {}  # id -> (best rank, first ranking at that rank)
    for which, ranking in enumerate(rankings):
        seen: set[str] = set()
        for rank, pid in enumerate(ranking, start=1):
            if pid in seen:
                continue
            seen.add(pid)
            score[pid] = score.get(pid, Fraction(0)) + Fraction(1, k + rank)
            if pid not in best or rank < best[pid][0]:
                best[pid] = (rank, which)
    fused = sorted(score, key=lambda pid: (-score[pid], best[pid]))
    return fused if depth is None else fused[:depth]


class QueryTransformer:
    """Questions -> what is searched, for transform ``name`` (any of ``QUERY_TRANSFORMS`` but
    none), the texts coming from ``texts``."""

    def __init__(self, name: str, texts: QueryTexts, *, hyde_documents: int = 3, hyde_max_new_tokens: int = 64):
        check_transform(name, hyde_documents)
        traits = transform_traits(name)
        if not traits.writes_text:
            raise ConfigError(f"query transform {name!r} writes no text: search the questions as they are")
        if traits.samples and hyde_documents > 1 and not can_sample(texts.lm):
            raise ConfigError(
                f"query transform {name} draws its extra passages by sampling, which model "
                f"{texts.lm.name!r} cannot do; use a local model (bundled or hf:) or hyde_documents: 1"
            )
        self.name, self.texts, self.traits = name, texts, traits
        self.combine = QUERY_TRANSFORMS.open(name)
        self.documents = hyde_documents if traits.samples else 1
        self.hyde_max_new_tokens = hyde_max_new_tokens

    @property
    def prompt(self) -> QueryPrompt:
        assert self.traits.prompt is not None  # every transform that writes text asks with one
        return self.traits.prompt

    @property
    def max_new_tokens(self) -> int:
        return self.traits.max_new_tokens or self.hyde_max_new_tokens

    def needed(self, question: str) -> list[tuple[QueryPrompt, str, int, int]]:
        """The texts ``question`` needs: (prompt, question, max_new_tokens, draw) each."""
        return [(self.prompt, question, self.max_new_tokens, draw) for draw in range(self.documents)]

    def write(self, question: str) -> int:
        """Have every text ``question`` needs; returns how many the model wrote now."""
        before = self.texts.generated
        for args in self.needed(question):
            self.texts.text(*args)
        return self.texts.generated - before

    def count(self, questions: Sequence[str]) -> int:
        """How many texts these questions need."""
        return len(questions) * self.documents

    def queries(self, questions: list[str]) -> list[str | list[str]]:
        """What each question is searched with (a list: several searches, their rankings fused)."""
        return [self.query(q) for q in questions]

    def query(self, question: str) -> str | list[str]:
        return self.combine(question, [self._text(*args) for args in self.needed(question)])

    def _text(self, prompt: QueryPrompt, question: str, max_new_tokens: int, draw: int) -> str:
        record = self.texts.record(prompt, question, max_new_tokens, draw)  # written before the search
        return record["text"] if record is not None else self.texts.text(prompt, question, max_new_tokens, draw)

    def generation_seconds(self, questions: Sequence[str]) -> float:
        """Seconds the model spent writing these questions' texts (as recorded when written)."""
        keys = {self.texts.key(*args) for q in questions for args in self.needed(q)}
        return sum(self.texts.records[key]["seconds"] for key in keys if key in self.texts.records)

    def settings(self) -> dict[str, object]:
        """The transform's settings, as a summary records them."""
        out: dict[str, object] = {"query_transform": self.name}
        if self.traits.hyde_like:
            out["hyde_max_new_tokens"] = self.hyde_max_new_tokens
        else:
            out["query_max_new_tokens"] = self.max_new_tokens
        if self.traits.samples:
            out["hyde_documents"] = self.documents
            out["hyde_sampling"] = {"temperature": TEMPERATURE, "top_p": TOP_P}
        if self.traits.fuses:
            out["fusion"] = f"rrf (k={RRF_K})"
        out["query_prompt_style"] = "chat" if self.texts.frame is not None else "plain"
        return out


def check_transform(name: str, hyde_documents: int = 3) -> None:
    """A transform name and its settings, checked: the errors name the valid choices or the key."""
    if name not in QUERY_TRANSFORMS:
        raise ConfigError(f"unknown query transform {name!r}; choose one of: {QUERY_TRANSFORMS.choices(', ')}")
    if not isinstance(hyde_documents, int) or hyde_documents < 1:
        raise ConfigError(f"hyde_documents must be at least 1 (got {hyde_documents!r})")
