"""Reader fine-tuning examples (the best-practices paper's generator fine-tuning): a training
question with one of four contexts, in the prompt `single` answers with, the answer line learned.

Contexts (D_g, D_r, D_gr, D_gg in the paper):

    g    the question's gold passages (its supporting paragraphs, in the file's order)
    r    one passage drawn at random from another question's paragraphs
    gr   the gold passages, then the random one
    gg   the gold passages twice (g1 g2 g1 g2)
    none no passages (evaluation only: the paper's D_∅, closed book)

The random passage of a question is fixed by the seed and the question's id: a generator
`random.Random(f"{seed}:{id}")` picks one of the other questions, then one of its paragraphs (gold
or distractor alike) that is not also a paragraph of this question (else it picks another question).

The passages come in that order (``gold_first``, the paper's layout), or, with ``shuffled``, in an
order drawn by `random.Random(f"dynrag-passage-order:{seed}:{id}")`: gold first in every training
prompt lets a reader learn "the answer is in the first passages" instead of reading, and the
shuffled order tells the two apart. Training and evaluation draw the order by the same rule.

The prompt is `PromptBuilder.build(question, passages)` (the exemplars `single` shows, the passages
as [1]..[k], the question, "Answer:"); the learned part is the answer line
" {answer phrase} {gold answer}." and the end-of-sequence token. Everything before it is -100: the
loss is the answer's negative log-likelihood given the prompt.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Sequence

from dynrag.corpus.passage import Passage
from dynrag.training.examples import TrainExample, masked_tokens
from dynrag.errors import ConfigError
from dynrag.datasets.examples import QAExample
from dynrag.methods.prompting import ANSWER, PromptBuilder
from dynrag.retrieval.base import Hit

TRAIN_CONTEXTS = ("g", "r", "gr", "gg")
EVAL_CONTEXTS = ("g", "r", "gr", "none")
CONTEXT_HELP = ("g: gold passages | r: one random passage of another question | gr: gold then random | "
                "gg: gold twice")
PASSAGE_ORDERS = ("gold_first", "shuffled")
ORDER_HELP = "gold_first: the context's own order (the paper's) | shuffled: a seeded order per question"


def check_context(context: str, choices: Sequence[str] = TRAIN_CONTEXTS, flag: str = "--context") -> str:
    if context not in choices:
        raise ConfigError(f"{flag} {context!r}: choose one of {', '.join(choices)}")
    return context


def gold_passages(example: QAExample) -> list[Passage]:
    """The supporting paragraphs of the question, in the order of its context."""
    support = set(example.supporting)
    return [p for p in example.contexts if p.id in support]


@dataclass(frozen=True)
class RandomPassages:
    """Draws each question's random passage from the other questions' paragraphs."""

    examples: Sequence[QAExample]
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "_with_contexts", [i for i, ex in enumerate(self.examples) if ex.contexts])

    def for_question(self, example: QAExample) -> Passage | None:
        """A paragraph of another question that is none of this question's own paragraphs (a
        paragraph shared between questions is skipped), or None when there is none."""
        own = {p.id for p in example.contexts}
        others = [i for i in self._with_contexts if self.examples[i].id != example.id]  # type: ignore[attr-defined]
        rng = random.Random(f"{self.seed}:{example.id}")
        while others:
            other = self.examples[others.pop(rng.randrange(len(others)))]
            choices = [p for p in other.contexts if p.id not in own]
            if choices:
                return choices[rng.randrange(len(choices))]
        return None


def check_order(order: str, flag: str = "--order") -> str:
    return check_context(order, PASSAGE_ORDERS, flag)


def context_passages(context: str, gold: list[Passage], rand: Passage | None, order: str = "gold_first",
                     key: str = "") -> list[Passage]:
    """The passages of a context mode, in prompt order; ``shuffled`` draws the order from ``key``
    (the seed and the question's id)."""
    if context == "none":
        return []
    if context in ("r", "gr") and rand is None:
        raise ValueError("no random passage: no other question has paragraphs")
    passages = {"g": gold, "r": [rand], "gr": [*gold, rand], "gg": [*gold, *gold]}[context]
    if check_order(order) == "shuffled":
        passages = list(passages)
        random.Random(f"dynrag-passage-order:{key}").shuffle(passages)
    return passages  # type: ignore[return-value]


def as_hits(passages: list[Passage]) -> list[Hit]:
    return [Hit(p.id, p.title, p.text, 0.0) for p in passages]


def answer_line(builder: PromptBuilder, answer: str) -> str:
    return f" {builder.answer_phrase} {answer.strip()}."


def reader_example(tokenizer: Any, builder: PromptBuilder, example: QAExample, passages: list[Passage]) -> TrainExample:
    """Token ids and labels: the `single` prompt with `passages`, then the learned answer line and EOS."""
    prompt = builder.build(example.question, as_hits(passages) or None)
    prompt.add(ANSWER, answer_line(builder, example.answers[0]))
    ids, labels = masked_tokens(tokenizer, prompt, learned=(ANSWER,))
    eos = tokenizer.eos_token_id
    if eos is not None:
        ids.append(eos)
        labels.append(eos)
    return TrainExample(example.id, tuple(ids), tuple(labels))


@dataclass
class Built:
    examples: list[TrainExample]
    no_gold: int = 0  # questions without supporting paragraphs (left out: no D_g)
    too_long: int = 0  # longer than max_tokens (left out)


def build_reader_examples(tokenizer: Any, builder: PromptBuilder, questions: Sequence[QAExample], context: str,
                          max_tokens: int, seed: int = 0, order: str = "gold_first") -> Built:
    check_context(context)
    check_order(order)
    draw = RandomPassages(questions, seed)
    built = Built([])
    for ex in questions:
        gold = gold_passages(ex)
        if not gold or not ex.answers:
            built.no_gold += 1
            continue
        passages = context_passages(context, gold, draw.for_question(ex), order, f"{seed}:{ex.id}")
        item = reader_example(tokenizer, builder, ex, passages)
        if len(item) > max_tokens:
            built.too_long += 1
            continue
        built.examples.append(item)
    return built
