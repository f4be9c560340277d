"""Binary tree search for the cheapest correct narrative (DeepRAG's Algorithm 1).

A priority queue holds partial narratives ordered by retrieval count, then by number of steps,
then by insertion order. The cheapest is taken; its next sub-question is asked for. When there is
none (the model or the gold decomposition says it is done) or the narrative already has
`max_steps` sub-questions, the final answer is written and checked: correct ends the search.
Otherwise two children go on the queue: the sub-question answered from the model's own
knowledge (**same cost**) and answered with retrieved passages (**cost + 1**), the second only
while the narrative has fewer than `max_retrievals` retrievals. Both limits are the dataset's
(its registry entry's DeepRAG limits), the ones its models are trained and evaluated under.

Children are materialised lazily: a child's answer is written only when the child is taken from
the queue. Greedy decoding is deterministic, so this finds exactly what writing both answers at
once would find, without writing the answers of children that are never taken.

What the authors' released code does differently, and is not copied: both children cost + 1;
the depth limit counts only retrievals (here a step limit bounds the tree too); "correct" is substring containment either way (so an empty
answer matches everything); a failed search is retried with gold supporting sentences; and the
gold answer is written into the saved trajectory. Here "correct" is normalised exact match with
any gold answer or alias by default (or a token-F1 threshold), and nothing gold enters a
trajectory. `Match` kind `contains` is the authors' rule instead, on whole words rather than
characters (so "no" is not inside "Norway"); with it the trajectory's final answer is the gold
answer the written one matched (synth.py), as the authors save it.
"""

from __future__ import annotations

import heapq
import random
import re
from dataclasses import dataclass, field
from math import comb
from typing import Literal, Protocol, Sequence

from dynrag.errors import ConfigError
from dynrag.datasets.metrics import best_token_scores, exact_match, normalize_answer, yes_no
from dynrag.methods.deeprag.narrative import NarrativeStep

History = tuple[NarrativeStep, ...]


class Expander(Protocol):
    """What the search asks of the models and the retriever for one question."""

    def next_subquery(self, history: History) -> str | None:
        """The next sub-question after `history`, or None when the narrative should end."""

    def answer(self, history: History, subquery: str, retrieve: bool) -> NarrativeStep:
        """`subquery` answered from memory, or with passages retrieved for it."""

    def final_answer(self, history: History) -> str: ...

    def is_correct(self, answer: str) -> bool: ...


def exhaustive_nodes(max_steps: int, max_retrievals: int | None = None) -> int:
    """Nodes of the full tree of narratives with at most T = `max_steps` sub-questions and at most R
    = `max_retrievals` retrievals: the sum over depths d <= T of C(d, r) for r <= R; 2^(T+1) - 1
    without a retrieval limit.

    Every node is taken from the queue at most once, so this budget never cuts a search short.
    """
    cap = max_steps if max_retrievals is None else max_retrievals
    return sum(comb(d, r) for d in range(max_steps + 1) for r in range(min(d, cap) + 1))


@dataclass(frozen=True)
class SearchLimits:
    """T, R and the budget of queue entries taken per question.

    The paper's search has no node budget; ``max_nodes=None`` (the default) is the exhaustive one
    for T. A smaller budget cuts questions whose cheapest correct narrative needs many retrievals:
    the cut happens while narratives with ``SearchResult.cut_at`` retrievals are being tried.
    """

    max_steps: int  # T: most sub-questions in a narrative (no default: the dataset's limits give it)
    max_nodes: int | None = None  # most queue entries taken (expanded) per question; None: exhaustive
    max_retrievals: int | None = None  # R: most retrievals in a narrative; None: up to T

    def __post_init__(self) -> None:
        if self.max_steps < 1 or (self.max_nodes is not None and self.max_nodes < 1):
            raise ConfigError("max_steps and max_nodes must be at least 1")
        if self.max_retrievals is not None and self.max_retrievals < 0:
            raise ConfigError("max_retrievals must be 0 or more")
        if self.max_nodes is None:
            object.__setattr__(self, "max_nodes", self.whole_tree)

    @property
    def whole_tree(self) -> int:
        return exhaustive_nodes(self.max_steps, self.max_retrievals)

    @property
    def exhaustive(self) -> bool:
        """True when the budget cannot cut a search (it covers the whole tree for T and R)."""
        return self.max_nodes >= self.whole_tree

    def may_retrieve(self, retrievals: int) -> bool:
        return self.max_retrievals is None or retrievals < self.max_retrievals


@dataclass(frozen=True)
class Pending:
    subquery: str
    retrieve: bool


@dataclass(order=True)
class Node:
    retrievals: int
    steps: int
    seq: int
    history: History = field(compare=False)
    pending: Pending | None = field(default=None, compare=False)


Status = Literal["found", "exhausted", "node_limit"]


@dataclass
class SearchResult:
    status: Status
    steps: History | None = None
    final_answer: str | None = None
    expanded: int = 0  # queue entries taken
    pushed: int = 1  # queue entries made, the root included
    terminals: int = 0  # final answers written and checked
    queued: int = 0  # entries left on the queue
    # With status node_limit: the retrieval count of the cheapest entry left on the queue. Every
    # narrative with fewer retrievals was tried; those with this many or more were not all tried.
    cut_at: int | None = None
    # (retrievals, steps) of each node in the order it was taken: the queue discipline, observable.
    order: list[tuple[int, int]] = field(default_factory=list)
    # With collect_all: every correct narrative (steps, final answer) in the order found, and
    # whether the whole tree was searched (False when the node budget cut it).
    correct: list[tuple[History, str]] = field(default_factory=list)
    complete: bool = True
    # Every final answer judged wrong, in the order written: why a search found nothing.
    wrong: list[str] = field(default_factory=list)

    @property
    def retrievals(self) -> int | None:
        return None if self.steps is None else sum(s.retrieve for s in self.steps)

    def tree_counts(self) -> dict[str, int]:
        return {"expanded": self.expanded, "pushed": self.pushed, "terminals": self.terminals, "queued": self.queued}


def children(node: Node, history: History, subquery: str, seq: int, retrieve: bool = True) -> tuple[Node, ...]:
    """The parametric child (same cost) and, when `retrieve`, the retrieving child (cost + 1)."""
    steps = len(history) + 1
    parametric = Node(node.retrievals, steps, seq, history, Pending(subquery, False))
    if not retrieve:
        return (parametric,)
    return parametric, Node(node.retrievals + 1, steps, seq + 1, history, Pending(subquery, True))


def tree_search(expander: Expander, limits: SearchLimits, collect_all: bool = False) -> SearchResult:
    """The cheapest correct narrative; with `collect_all` the search goes on past it and
    ``result.correct`` holds every correct narrative in the tree (the result's own steps are
    still the first found, the cheapest: see `select_path` for choosing another)."""
    result = SearchResult("exhausted")
    queue = [Node(0, 0, 0, ())]
    seq = 1
    while queue:
        if result.expanded >= limits.max_nodes:
            result.complete = False
            if not result.correct:
                result.status = "node_limit"
                result.cut_at = queue[0].retrievals
            break
        node = heapq.heappop(queue)
        result.expanded += 1
        result.order.append((node.retrievals, node.steps))
        history = node.history
        if node.pending is not None:
            history = history + (expander.answer(history, node.pending.subquery, node.pending.retrieve),)
        subquery = expander.next_subquery(history) if len(history) < limits.max_steps else None
        if subquery is None:
            answer = expander.final_answer(history)
            result.terminals += 1
            if expander.is_correct(answer):
                if not result.correct:
                    result.status, result.steps, result.final_answer = "found", history, answer
                result.correct.append((history, answer))
                if not collect_all:
                    break
            else:
                result.wrong.append(answer)
            continue
        made = children(node, history, subquery, seq, limits.may_retrieve(node.retrievals))
        for child in made:
            heapq.heappush(queue, child)
        seq += 2
        result.pushed += len(made)
    result.queued = len(queue)
    return result


# ---- which correct narrative to imitate ---------------------------------------------------------

SELECTIONS = ("min", "max", "random")


def check_selection(select: str) -> str:
    if select not in SELECTIONS:
        raise ConfigError(f"--select {select!r}: choose one of {', '.join(SELECTIONS)}")
    return select


def needs_whole_tree(select: str) -> bool:
    """Only the fewest-retrievals choice may stop at the first correct narrative."""
    return check_selection(select) != "min"


def select_path(candidates: Sequence[tuple[History, str]], select: str, rng: random.Random | None = None) -> int:
    """The index of the narrative to imitate among the correct ones, in the order the search found them.

    min: fewest retrievals; max: most retrievals (ties: the first found, i.e. the one with fewer
    steps, then the parametric branch earlier); random: uniformly among all of them, drawn from
    `rng` (seeded by the caller, so a rerun draws the same)."""
    check_selection(select)
    if not candidates:
        raise ValueError("no correct narrative to select from")
    costs = [sum(s.retrieve for s in steps) for steps, _ in candidates]
    if select == "min":
        return costs.index(min(costs))
    if select == "max":
        return costs.index(max(costs))
    if rng is None:
        raise ValueError("select='random' needs a seeded random.Random")
    return rng.randrange(len(candidates))


# ---- correctness ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Match:
    """How a final answer is judged against the gold answers and aliases."""

    kind: Literal["em", "f1", "contains"] = "em"
    threshold: float = 1.0

    @classmethod
    def parse(cls, spec: str) -> "Match":
        """`em` (normalised exact match), `f1:T` (token F1 >= T, 0 < T <= 1) or `contains` (a
        gold answer's words inside the answer's, or the answer's inside a gold answer's)."""
        spec = spec.strip().lower()
        if spec in ("em", "contains"):
            return cls(spec)  # type: ignore[arg-type]
        m = re.fullmatch(r"f1:([0-9]*\.?[0-9]+)", spec)
        if m and 0.0 < float(m.group(1)) <= 1.0:
            return cls("f1", float(m.group(1)))
        raise ConfigError(f"--match {spec!r}: expected 'em', 'contains' or 'f1:T' with 0 < T <= 1 (e.g. f1:0.8)")

    def __str__(self) -> str:
        return f"f1:{self.threshold:g}" if self.kind == "f1" else self.kind

    @property
    def keeps_gold(self) -> bool:
        """Whether a found narrative's final answer is saved as the gold answer it matched: a
        containment match accepts sentences and fragments, which imitation must not learn."""
        return self.kind == "contains"

    def correct(self, answer: str, golds: Sequence[str], yes_no_dataset: bool = False) -> bool:
        return self.matched_gold(answer, golds, yes_no_dataset) is not None

    def matched_gold(self, answer: str, golds: Sequence[str], yes_no_dataset: bool = False) -> str | None:
        """The first gold answer or alias the answer is right by; None when it is wrong."""
        answer = (answer or "").strip()
        if yes_no_dataset:
            answer = yes_no(answer) or answer
        if not normalize_answer(answer):
            return None  # an empty answer is never right, whatever the gold
        for gold in golds:
            if self.kind == "em" and exact_match(answer, [gold]) == 1.0:
                return gold
            if self.kind == "f1" and best_token_scores(answer, [gold]).f1 >= self.threshold:
                return gold
            if self.kind == "contains" and words_within(answer, gold):
                return gold
        return None


def words_within(answer: str, gold: str) -> bool:
    """Whether one text's normalised words appear, in order and adjacent, inside the other's."""
    a, g = normalize_answer(answer).split(), normalize_answer(gold).split()
    if not a or not g:
        return False
    short, long = (a, g) if len(a) <= len(g) else (g, a)
    return any(long[i : i + len(short)] == short for i in range(len(long) - len(short) + 1))
