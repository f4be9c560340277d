"""What ``world reader --style chain`` trains on beside reading and replay (pure): multi-hop train
questions in the very prompt the iterative methods build for ``--dataset world``, answered with one
short sentence per hop and then the answer phrase.

FLARE and DRAGIN decide to retrieve while the reader writes a sentence, so a reader that answers a
chain in one step never gives them a second sentence to act on. Here each hop's sentence states
its fact in the world's own wording (a fictional relation's first article template, a bank
relation's article sentence), naming the hop's subject, so the next sentence starts from the
entity the last one named: "A was founded by B. B was born in C. So the answer is C."

What the prompt's documents hold follows what the model knows: a hop whose fact the base model was
probed to know is written from memory and its passage is left out; every other hop's passage is
there, among ``others`` of the record's passages that support no hop, in a seeded order, as a
retrieval would have returned it. A *partial* example starts after its first hops are already
written (the answer so far, in the prompt, no loss) and shows only the passages of the hops still
to write, as the methods' prompt does once a new retrieval has replaced the documents: the reader
learns to go on from a written chain with the passage of the hop in front of it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from dynrag.methods.prompting import PromptBuilder
from dynrag.retrieval.base import Hit
from dynrag.world.articles import stated
from dynrag.world.teach_text import TextExample

CHAIN, PARTIAL = "chain", "chain_partial"


def methods_builder() -> PromptBuilder:
    """The prompt builder ``dynrag eval --dataset world`` hands the methods: the dataset's worked
    examples, as many as the methods show."""
    from dynrag.datasets.formats.registry import dataset_spec

    return PromptBuilder.for_dataset(dataset_spec("world").exemplar_style)


@dataclass(frozen=True)
class ChainHop:
    sentence: str
    known: bool  # the probed model knows the fact: written from memory, no passage in the prompt
    passage: Mapping[str, Any]  # the record's paragraph that states it


def is_chain(record: Mapping[str, Any]) -> bool:
    """A question answered in more than one step: a bridge of two hops or more, or a comparison."""
    return record["world"]["kind"] == "comparison" or len(record["question_decomposition"]) >= 2


def chain_hops(record: Mapping[str, Any], relations: Mapping[str, str]) -> list[ChainHop]:
    """Each hop of ``record`` as its sentence; ``relations``: fact id -> relation (the world's facts)."""
    out = []
    for hop in record["question_decomposition"]:
        sentence = stated(relations[hop["fact"]], hop["entity"], hop["answer"], hop["real"])
        # An unprobed hop (known null) cannot be trusted to memory: it keeps its passage.
        out.append(ChainHop(sentence, hop["known"] is True, record["paragraphs"][hop["paragraph_support_idx"]]))
    return out


def chain_target(hops: Sequence[ChainHop], answer: str, phrase: str) -> str:
    """The continuation after "Answer:" (or after the sentences already written)."""
    return " " + " ".join(h.sentence for h in hops) + f" {phrase} {answer}."


def shown_passages(record: Mapping[str, Any], hops: Sequence[ChainHop], others: int,
                   rng: random.Random) -> list[Mapping[str, Any]]:
    """The passages of ``hops`` the model must read, with up to ``others`` passages supporting no
    hop, shuffled; none when every hop is known (nothing to retrieve)."""
    gold = list({id(h.passage): h.passage for h in hops if not h.known}.values())
    if not gold:
        return []
    rest = [p for p in record["paragraphs"] if not p["is_supporting"]]
    chosen = gold + rng.sample(rest, min(others, len(rest)))
    rng.shuffle(chosen)
    return chosen


def as_hits(passages: Sequence[Mapping[str, Any]]) -> list[Hit]:
    """Passages as a retriever returns them (the title is the article's entity, as in the corpus)."""
    return [Hit(str(p["idx"]), p["title"], p["paragraph_text"], 0.0) for p in passages]


def chain_example(record: Mapping[str, Any], relations: Mapping[str, str], builder: PromptBuilder, start: int,
                  others: int, rng: random.Random) -> TextExample:
    """One example: the hops before ``start`` already written, the rest to write (0: all of them)."""
    hops = chain_hops(record, relations)
    todo = hops[start:]
    hits = as_hits(shown_passages(record, todo, others, rng))
    written = " ".join(h.sentence for h in hops[:start])
    prompt = builder.build(record["question"], hits or None, written)
    return TextExample(PARTIAL if start else CHAIN, prompt.text, chain_target(todo, record["answer"], builder.answer_phrase))


def chain_examples(sources: Sequence[tuple[Sequence[Mapping[str, Any]], Mapping[str, str]]], builder: PromptBuilder,
                   n: int, partial_share: float, others: int, rng: random.Random) -> list[TextExample]:
    """``n`` chain examples from the multi-hop questions of ``sources`` ((records, relations) of each
    training world), drawn without repeats until the pool is used up; ``partial_share`` of them
    start after a random number of written hops."""
    pool = [(r, relations) for records, relations in sources for r in records if is_chain(r)]
    picked: list[tuple[Mapping[str, Any], Mapping[str, str]]] = []
    while pool and len(picked) < n:
        picked += rng.sample(pool, min(len(pool), n - len(picked)))
    out = []
    for record, relations in picked:
        hops = len(record["question_decomposition"])
        start = rng.randrange(1, hops) if rng.random() < partial_share else 0
        out.append(chain_example(record, relations, builder, start, others, rng))
    return out
