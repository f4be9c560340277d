"""The query transforms of ``dynrag eval-retrieval`` in one registry (``QUERY_TRANSFORMS``): each
entry's opener gives the function that turns a question and the model's texts into what is
searched, and its ``TransformTraits`` say what callers may ask without testing the name (does it
need a model, are its texts HyDE passages, does it draw several, does it fuse rankings).

The prompts of the rewrite and decompose transforms, and the parsers of their texts, live here
beside their entries; the HyDE prompt is retrieval/hyde.py's. The run configuration validates
names against this registry, so it imports nothing heavier than those prompts.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from dynrag.registry import Options, Registry
from dynrag.retrieval.hyde import HYDE, join_passages, join_query
from dynrag.retrieval.query_prompts import QueryPrompt

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


@dataclass(frozen=True)
class TransformTraits:
    """What a caller may ask about a query transform without opening it."""

    writes_text: bool = True  # False: the questions are searched as they are, no model needed
    prompt: QueryPrompt | None = None  # what the model is asked for
    max_new_tokens: int | None = None  # None: the run's hyde_max_new_tokens (a HyDE passage)
    hyde_like: bool = False  # its texts are HyDE passages (hyde_* settings, OUT/hyde.jsonl)
    samples: bool = False  # searches hyde_documents texts, all but the first drawn by sampling
    fuses: bool = False  # several searches per question, their rankings fused
    single_hyde: bool = False  # the question plus one greedy HyDE passage: what `--hyde` names
    title: str = ""  # what a summary table's title adds ({n}: hyde_documents)


Query = str | list[str]
Combine = Callable[[str, list[str]], Query]  # (question, the model's texts) -> what is searched

QUERY_TRANSFORMS: Registry[Combine] = Registry("query transform")
NO_TRANSFORM = "none"  # the default: search the bare question
HYDE_TRANSFORM = "hyde"  # what the older `--hyde` flag (and `hyde: true`) asks for


def _add(name: str, summary: str, traits: TransformTraits, combine: Combine) -> None:
    QUERY_TRANSFORMS.add(name, lambda options: combine, Options, summary, traits)


_add(NO_TRANSFORM, "search the question as it is", TransformTraits(writes_text=False), lambda q, texts: q)
_add(HYDE_TRANSFORM, "the question followed by one hypothetical passage the model writes",
     TransformTraits(prompt=HYDE, hyde_like=True, single_hyde=True, title=" + HyDE"),
     lambda q, texts: join_query(q, texts[0]))
_add("hyde-only", "that passage alone", TransformTraits(prompt=HYDE, hyde_like=True, title=" + HyDE passage alone"),
     lambda q, texts: texts[0] or q)
_add("hyde-multi", "the question followed by N passages, all but the first drawn",
     TransformTraits(prompt=HYDE, hyde_like=True, samples=True, title=" + HyDE ({n} passages)"), join_passages)
_add("rewrite", "a one-line search query the model writes",
     TransformTraits(prompt=REWRITE, max_new_tokens=REWRITE_MAX_NEW_TOKENS, title=" + query rewriting"),
     lambda q, texts: parse_rewrite(texts[0], q))
_add("decompose", "one to three sub-questions, each searched, their rankings fused",
     TransformTraits(prompt=DECOMPOSE, max_new_tokens=DECOMPOSE_MAX_NEW_TOKENS, fuses=True,
                     title=" + query decomposition"),
     lambda q, texts: parse_subquestions(texts[0], q))


def transform_traits(name: str) -> TransformTraits:
    """The traits of transform ``name`` (an unknown name lists the choices)."""
    return QUERY_TRANSFORMS.get(name).traits


def writes_text(name: str | None) -> bool:
    """Whether transform ``name`` has the model write text. An unknown name counts as writing, so
    the run configuration's check is the one that names the choices; None is no transform."""
    return name is not None and (name not in QUERY_TRANSFORMS or transform_traits(name).writes_text)
