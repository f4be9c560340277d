"""Metrics as pure functions: SQuAD normalisation, exact match and token F1 over gold aliases for
answers; recall@K, support_all@K and reciprocal rank for retrieval rankings."""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Protocol, Sequence

from dynrag.registry import Options, Registry

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation and the articles a/an/the, collapse whitespace (SQuAD v1.1)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


@dataclass(frozen=True)
class TokenScores:
    f1: float
    precision: float
    recall: float


def token_scores(prediction: str, gold: str) -> TokenScores:
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    # yes/no/noanswer must match exactly: partial overlap with them means nothing.
    special = {"yes", "no", "noanswer"}
    if (" ".join(pred_tokens) in special or " ".join(gold_tokens) in special) and pred_tokens != gold_tokens:
        return TokenScores(0.0, 0.0, 0.0)
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return TokenScores(0.0, 0.0, 0.0)
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return TokenScores(2 * precision * recall / (precision + recall), precision, recall)


def exact_match(prediction: str, golds: Iterable[str]) -> float:
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in golds))


def best_token_scores(prediction: str, golds: Iterable[str]) -> TokenScores:
    """The gold answer (or alias) giving the highest F1, with its precision and recall."""
    scores = [token_scores(prediction, g) for g in golds]
    return max(scores, key=lambda s: s.f1, default=TokenScores(0.0, 0.0, 0.0))


_YES = {"yes", "true", "correct", "yeah"}
_NO = {"no", "false", "incorrect", "not"}


def yes_no(text: str) -> str | None:
    """Map a free-text answer to "yes"/"no" (first yes-like or no-like word wins), else None.

    "Yes, because ..." -> "yes"; "It is false." -> "no"; "Paris" -> None.
    """
    for token in normalize_answer(text).split():
        if token in _YES:
            return "yes"
        if token in _NO:
            return "no"
    return None


@dataclass(frozen=True)
class AnswerScores:
    """Scores of one prediction: the string actually scored and EM/F1/precision/recall on it."""

    scored: str
    em: float
    f1: float
    precision: float
    recall: float


def score_answer(final_answer: str, prediction: str, golds: list[str], yes_no_dataset: bool = False) -> AnswerScores:
    """The scores a run records for one question.

    The extracted short answer is scored; when extraction failed (empty), the whole generated
    text is scored instead (as DRAGIN's evaluation does). On a yes/no dataset the answer is first
    mapped to "yes"/"no" (unmapped answers are scored as they are and so score 0).
    """
    scored = (final_answer or "").strip() or (prediction or "").strip()
    if yes_no_dataset:
        scored = yes_no(scored) or scored
    tokens = best_token_scores(scored, golds)
    return AnswerScores(scored, exact_match(scored, golds), tokens.f1, tokens.precision, tokens.recall)


# -- scorers: how a run turns one generated answer into EM/F1 (a named choice, `--scorer NAME`) ----

Scorer = Callable[[str, str, list[str]], AnswerScores]
"""(extracted short answer, full generated text, gold answers) -> the scores a run records."""

# What DRAGIN's evaluation strips from the end of an extracted answer.
_DRAGIN_TAILS = ("</s>", "<|endoftext|>")


def dragin_extract(prediction: str, yes_no_dataset: bool, whole_text_fallback: bool) -> str:
    """The answer as DRAGIN's evaluation extracts it from the generated text.

    The text after the *first* "the answer is" (case-sensitive, one separator skipped), with a
    trailing end-of-text token and full stop removed. On a yes/no dataset (StrategyQA) that text maps
    to "yes" when it starts with "yes" (any case) and to "no" otherwise. Without the phrase the
    answer is empty, except with ``whole_text_fallback`` (their 2WikiMultihopQA), which scores the
    whole text.
    """
    phrase = "the answer is"
    at = prediction.find(phrase)
    if at < 0:
        return prediction if whole_text_fallback and not yes_no_dataset else ""
    rest = prediction[at + len(phrase) + 1 :]
    if yes_no_dataset:
        return "yes" if rest[:3].lower() == "yes" else "no"
    for tail in _DRAGIN_TAILS:
        if rest.endswith(tail):
            rest = rest[: -len(tail)]
    return rest[:-1] if rest.endswith(".") else rest


def separate_max_token_scores(prediction: str, golds: Iterable[str]) -> TokenScores:
    """F1, precision and recall each maximised over the golds on its own, as DRAGIN's scorer does
    (so precision may come from one gold and recall from another)."""
    f1 = precision = recall = 0.0
    for gold in golds:
        s = token_scores(prediction, gold)
        f1, precision, recall = max(f1, s.f1), max(precision, s.precision), max(recall, s.recall)
    return TokenScores(f1, precision, recall)


class ScorerOptions(Options):
    """Scorers take no options yet; the dataset decides their yes/no and fallback behaviour."""


SCORERS: Registry[Callable[..., Scorer]] = Registry("scorer")


class ScoredDataset(Protocol):
    """What a scorer reads of a dataset's registry entry (``datasets.formats.Dataset``)."""

    yes_no: bool
    whole_text_fallback: bool


@SCORERS.register("squad", ScorerOptions, "the short answer after the last answer phrase; SQuAD EM/F1, the best gold's P/R (default)")
def squad_scorer(options: ScorerOptions, *, dataset: ScoredDataset) -> Scorer:
    yes_no = dataset.yes_no

    def score(final_answer: str, prediction: str, golds: list[str]) -> AnswerScores:
        return score_answer(final_answer, prediction, golds, yes_no)

    return score


@SCORERS.register("dragin", ScorerOptions, "as DRAGIN's evaluation: after the first 'the answer is'; yes/no by prefix; P and R maximised separately")
def dragin_scorer(options: ScorerOptions, *, dataset: ScoredDataset) -> Scorer:
    yes_no, fallback = dataset.yes_no, dataset.whole_text_fallback

    def score(final_answer: str, prediction: str, golds: list[str]) -> AnswerScores:
        scored = dragin_extract(prediction or "", yes_no, fallback)
        tokens = separate_max_token_scores(scored, golds)
        return AnswerScores(scored, exact_match(scored, golds), tokens.f1, tokens.precision, tokens.recall)

    return score


def open_scorer(name: str, dataset: ScoredDataset) -> Scorer:
    """Scorer ``name`` for ``dataset``'s registry entry (its yes/no and fallback traits)."""
    return SCORERS.open(name, None, dataset=dataset)


# ---- retrieval rankings ------------------------------------------------------------------------


def recall_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """Fraction of the distinct gold ids found in ``ranked[:k]``."""
    gold_set = set(gold)
    if not gold_set:
        raise ValueError("recall needs at least one gold id")
    return len(gold_set & set(ranked[:k])) / len(gold_set)


def support_all_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """1.0 when every gold id is in ``ranked[:k]``, else 0.0."""
    gold_set = set(gold)
    if not gold_set:
        raise ValueError("support_all needs at least one gold id")
    return 1.0 if gold_set <= set(ranked[:k]) else 0.0


def reciprocal_rank(ranked: Sequence[str], gold: Iterable[str]) -> float:
    """1 / (1-based rank of the first gold id in ``ranked``); 0.0 when none is there."""
    gold_set = set(gold)
    for rank, pid in enumerate(ranked, start=1):
        if pid in gold_set:
            return 1.0 / rank
    return 0.0


# ---- ground-truth coverage ---------------------------------------------------------------------


def covers(prediction: str, golds: Iterable[str]) -> float:
    """1.0 when some gold answer, normalised, occurs in the normalised prediction as whole words
    ("paris" is in "it is in paris france", "no" is not in "not"), else 0.0. The best-practices
    paper's ground-truth coverage for short QA answers; an empty gold never counts."""
    text = f" {normalize_answer(prediction)} "
    return float(any(gold and f" {gold} " in text for gold in (normalize_answer(g) for g in golds)))


# ---- ranking quality with binary relevance (the retrieval tables) ---------------------------------


def ndcg_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """Binary-relevance nDCG@k: sum of 1/log2(rank + 1) over the gold ids in ``ranked[:k]``, over the
    same sum for an ideal ranking (every gold id first). A gold id counts once, at its first rank."""
    gold_set = set(gold)
    if not gold_set:
        raise ValueError("nDCG needs at least one gold id")
    seen: set[str] = set()
    dcg = 0.0
    for rank, pid in enumerate(ranked[:k], start=1):
        if pid in gold_set and pid not in seen:
            seen.add(pid)
            dcg += 1.0 / math.log2(rank + 1)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(gold_set), k) + 1))
    return dcg / ideal


def average_precision(ranked: Sequence[str], gold: Iterable[str]) -> float:
    """Mean over the gold ids of precision at the rank where each is found (0 for one never found),
    so a ranking cut short is charged for what it misses."""
    gold_set = set(gold)
    if not gold_set:
        raise ValueError("average precision needs at least one gold id")
    seen: set[str] = set()
    total = 0.0
    for rank, pid in enumerate(ranked, start=1):
        if pid in gold_set and pid not in seen:
            seen.add(pid)
            total += len(seen) / rank
    return total / len(gold_set)
