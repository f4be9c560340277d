"""Query transforms for retrieval-only evaluation: what is searched instead of the bare question.

- ``hyde``: the question followed by one hypothetical passage the model writes (retrieval/hyde.py);
- ``hyde-only``: that passage alone;
- ``hyde-multi``: the question followed by N passages; the first is the greedy one (shared with
  ``hyde``), the others are drawn (temperature 0.7, top-p 0.95, each seeded by its question and its
  number, so a rerun writes the same ones);
- ``rewrite``: a one-line search query the model writes for the question;
- ``decompose``: one to three sub-questions the model writes; each is searched, and their rankings
  are fused into one (``fuse_rankings``).

Every text comes through a ``QueryTexts`` (retrieval/hyde_cache.py), so it is written once and
read back from the cache file after. ``QueryTransformer.queries`` maps questions to what is
searched: a string per question, or (decompose) a list of strings whose rankings are fused.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fractions import Fraction

from dynrag.errors import ConfigError
from dynrag.retrieval.hyde import HYDE, join_passages, join_query
from dynrag.retrieval.hyde_cache import TEMPERATURE, TOP_P, QueryTexts
from dynrag.retrieval.query_prompts import QUERY_TRANSFORMS, QueryPrompt, can_sample

REWRITE = QueryPrompt(
    kind="rewrite",
    instruction="Rewrite the question as a search engine query. Keep every name and key term; leave out "
    "question words and filler; one line.",
    examples=(
        "Question: In which year did the architect of the Chrysler Building die?\n"
        "Query: Chrysler Building architect year of death\n\n"
    ),
    label="Query:",
    stop=("\n",),
)
DECOMPOSE = QueryPrompt(
    kind="decompose",
    instruction="Break the question into one to three simpler questions, each one answerable from a single "
    "passage. Write them one per line, numbered; a simple question stays as it is.",
    examples=(
        "Question: Were Ada Lovelace and Grace Hopper born in the same country?\n"
        "Sub-questions:\n1. Where was Ada Lovelace born?\n2. Where was Grace Hopper born?\n\n"
        "Question: When did the Berlin Wall fall?\n"
        "Sub-questions:\n1. When did the Berlin Wall fall?\n\n"
    ),
    label="Sub-questions:",
    stop=("\n\n", "Question:"),
    one_line=False,
)
REWRITE_MAX_NEW_TOKENS = 32
DECOMPOSE_MAX_NEW_TOKENS = 64
MAX_SUBQUESTIONS = 3
RRF_K = 60  # as in hybrid retrieval's RRF (Cormack et al., 2009)

# "1." "2)" "3 -" "- " "* " "• " "Sub-question 1:" at the start of a line
_MARKER = re.compile(r"^\s*(?:(?:sub-?questions?\s*)?\d+\s*[.):\-]|[-*•]|sub-?questions?\s*:)\s*", re.IGNORECASE)


def parse_subquestions(text: str, question: str, limit: int = MAX_SUBQUESTIONS) -> list[str]:
    """The sub-questions in the model's text: one per non-blank line, numbering or bullets taken
    off, duplicates dropped, the first ``limit`` kept; reading stops at a line starting a new
    "Question:" (the model going on to invent the next example). None found: ``[question]``."""
    found: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if line.lower().startswith("question:"):
            break
        item = _MARKER.sub("", line).strip()
        if item and item.lower() not in (f.lower() for f in found):
            found.append(item)
    return found[:limit] or [" ".join(question.split())]


def parse_rewrite(text: str, question: str) -> str:
    """The rewritten query: the model's first line without a "Query:" label or quotes; the
    question itself when nothing is left."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    line = re.sub(r"^query\s*:", "", line, flags=re.IGNORECASE).strip().strip("\"'").strip()
    return line or " ".join(question.split())


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
        if name == "none":
            raise ConfigError("query transform 'none' writes no text: search the questions as they are")
        if name == "hyde-multi" and hyde_documents > 1 and not can_sample(texts.lm):
            raise ConfigError(
                f"query transform hyde-multi draws its extra passages by sampling, which model "
                f"{texts.lm.name!r} cannot do; use a local model (bundled or hf:) or hyde_documents: 1"
            )
        self.name, self.texts = name, texts
        self.documents = hyde_documents if name == "hyde-multi" else 1
        self.hyde_max_new_tokens = hyde_max_new_tokens

    @property
    def prompt(self) -> QueryPrompt:
        return {"rewrite": REWRITE, "decompose": DECOMPOSE}.get(self.name, HYDE)

    @property
    def max_new_tokens(self) -> int:
        return {"rewrite": REWRITE_MAX_NEW_TOKENS, "decompose": DECOMPOSE_MAX_NEW_TOKENS}.get(
            self.name, self.hyde_max_new_tokens)

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
        texts = [self._text(*args) for args in self.needed(question)]
        if self.name == "hyde":
            return join_query(question, texts[0])
        if self.name == "hyde-only":
            return texts[0] or question
        if self.name == "hyde-multi":
            return join_passages(question, texts)
        if self.name == "rewrite":
            return parse_rewrite(texts[0], question)
        return parse_subquestions(texts[0], question)

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
        if self.name.startswith("hyde"):
            out["hyde_max_new_tokens"] = self.hyde_max_new_tokens
        else:
            out["query_max_new_tokens"] = self.max_new_tokens
        if self.name == "hyde-multi":
            out["hyde_documents"] = self.documents
            out["hyde_sampling"] = {"temperature": TEMPERATURE, "top_p": TOP_P}
        if self.name == "decompose":
            out["fusion"] = f"rrf (k={RRF_K})"
        out["query_prompt_style"] = "chat" if self.texts.frame is not None else "plain"
        return out


def check_transform(name: str, hyde_documents: int = 3) -> None:
    """A transform name and its settings, checked: the errors name the valid choices or the key."""
    if name not in QUERY_TRANSFORMS:
        raise ConfigError(f"unknown query transform {name!r}; choose one of: {', '.join(QUERY_TRANSFORMS)}")
    if not isinstance(hyde_documents, int) or hyde_documents < 1:
        raise ConfigError(f"hyde_documents must be at least 1 (got {hyde_documents!r})")
