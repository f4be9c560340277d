"""What ``world teach`` trains on, as text (pure): which entities are taught, and for each of their
facts paraphrased statements, closed-book questions and answers, plus reading examples.

Phrasings of a fictional fact come in three disjoint sets: the world's own questions
(``questions.FICTIONAL``, what dev and test ask), ``PROBE`` (the three the probe asks after
training, as the bank's probe phrasings for real facts) and ``TRAIN_QA`` (the only ones training
shows). So the probe measures knowledge, not a memorised question.

Statements follow the augmentation that makes memorised facts extractable (Allen-Zhu and Li,
Physics of Language Models 3.1): each entity gets several short write-ups per epoch, each stating
every taught fact with a template drawn at random and in a shuffled sentence order.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from dynrag.world.articles import TEMPLATES
from dynrag.world.bank import RealFact, mention
from dynrag.world.entities import Entity, Fact, World
from dynrag.world.questions import assign_splits

# Closed-book phrasings the re-probe asks ({x}: the subject); never in a training example.
PROBE: dict[str, tuple[str, str, str]] = {
    "born_in": ("Where was {x} born?", "Which town is the birthplace of {x}?", "{x} was born in which town?"),
    "birth_year": ("When was {x} born?", "What is the birth year of {x}?", "{x} was born in what year?"),
    "profession": ("What did {x} do for a living?", "What was the trade of {x}?", "{x} earned a living as what?"),
    "studied_at": ("Where did {x} study?", "Which school did {x} attend?", "{x} was educated at which school?"),
    "works_for": ("Who employed {x}?", "Where did {x} work?", "{x} was on the staff of which company?"),
    "founder": ("Who set up {x}?", "Who is the founder of {x}?", "{x} was started by whom?"),
    "based_in": ("Where is {x} based?", "Which town is home to {x}?", "{x} has its offices in which town?"),
    "founded": ("When was {x} founded?", "In what year did {x} open?", "{x} was established in which year?"),
    "located_in": ("Where is {x}?", "Which town is {x} in?", "{x} stands in which town?"),
    "first_principal": ("Who led {x} first?", "Who was the first head of {x}?", "{x} had whom as its first principal?"),
    "river": ("What river runs through {x}?", "Which river passes {x}?", "Which river is {x} on?"),
    "country": ("Which country is {x} in?", "{x} is a town of which country?", "In what country is {x}?"),
}

# Closed-book phrasings training uses; disjoint from PROBE and from the world's questions.
TRAIN_QA: dict[str, tuple[str, ...]] = {
    "born_in": ("What is the home town of {x}?", "Name the town of birth of {x}.", "Tell me where {x} was born."),
    "birth_year": ("Name the year of birth of {x}.", "Tell me the year {x} was born.", "Which year saw the birth of {x}?"),
    "profession": ("Name the profession of {x}.", "What job did {x} have?", "Tell me what {x} did for work."),
    "studied_at": ("Name the school of {x}.", "Tell me where {x} went to school.", "Which school taught {x}?"),
    "works_for": ("Name the employer of {x}.", "Tell me which company employed {x}.", "Whose staff was {x} on?"),
    "founder": ("Name the founder of {x}.", "Tell me who founded {x}.", "Who started {x}?"),
    "based_in": ("Name the home town of {x}.", "Tell me where {x} is based.", "Where does {x} have its offices?"),
    "founded": ("Name the founding year of {x}.", "Tell me when {x} was founded.", "Since which year has {x} existed?"),
    "located_in": ("Name the town of {x}.", "Tell me where {x} stands.", "In what town does {x} stand?"),
    "first_principal": ("Name the first principal of {x}.", "Tell me who first led {x}.", "Who headed {x} first?"),
    "river": ("Give the river that runs past {x}.", "Tell me which river flows past {x}.", "On what river does {x} lie?"),
    "country": ("Name the country of {x}.", "Tell me which country {x} is in.", "To what country does {x} belong?"),
}

# Statement templates beyond the articles' three: {s} subject, {o} value, {a} "a"/"an".
EXTRA_STATEMENTS: dict[str, tuple[str, ...]] = {
    "born_in": ("{s} is a native of {o}.", "{s} first saw daylight in {o}."),
    "birth_year": ("{s} arrived in {o}.", "{o} was the year {s} was born."),
    "profession": ("{s} followed the trade of {a} {o}.", "{s} was {a} {o} by profession."),
    "studied_at": ("{s} was educated at {o}.", "{o} is where {s} studied."),
    "works_for": ("{s} was on the staff of {o}.", "{o} employed {s}."),
    "founder": ("{o} founded {s}.", "{s} owes its start to {o}."),
    "based_in": ("{s} is run from {o}.", "{o} is the base of {s}."),
    "founded": ("{s} dates from {o}.", "In {o}, {s} was set up."),
    "located_in": ("{s} is found in {o}.", "{o} is the town of {s}."),
    "first_principal": ("{o} was the first head of {s}.", "{s} was first led by {o}."),
    "river": ("The {o} runs through {s}.", "{s} is a town on the {o}."),
    "country": ("{s} is part of {o}.", "{o} is the country of {s}."),
}


# Closed-book phrasings of the bank's relations for replay (facts the base model already knows,
# trained beside the taught ones so the question format does not come to mean "a taught value");
# disjoint from the probe's three and the held-out phrasing.
REPLAY_QA: dict[str, str] = {
    "capital": "Tell me the capital of {x}.",
    "continent": "Tell me the continent {x} belongs to.",
    "language": "Tell me the main language of {x}.",
    "currency": "Tell me the money used in {x}.",
    "author": "Tell me who wrote {x}.",
    "symbol": "Tell me the chemical symbol of {x}.",
    "river": "Tell me the river of {x}.",
    "capital_of": "Tell me which country has {x} for its capital.",
    "homeland": "Tell me the home country of {x}.",
}


def statement_templates(relation: str) -> tuple[str, ...]:
    return TEMPLATES[relation] + EXTRA_STATEMENTS[relation]


def _fill(template: str, subject: str, value: str) -> str:
    text = template.format(x=subject, s=subject, o=mention(value), a="an" if value[:1] in "aeiou" else "a")
    return text[:1].upper() + text[1:]


def probe_questions(fact: Fact, subject: str) -> tuple[str, str, str]:
    return tuple(_fill(p, subject, fact.value) for p in PROBE[fact.relation])  # type: ignore[return-value]


def train_questions(fact: Fact, subject: str) -> tuple[str, ...]:
    return tuple(_fill(p, subject, fact.value) for p in TRAIN_QA[fact.relation])


def candidates(world: World) -> list[Entity]:
    """Entities that may be taught: fictional, of the main cluster, and starting questions only in
    train (``assign_splits``). Dev and test questions reach them only as a later hop of a chain,
    and that hop becomes known once the taught model answers it."""
    split_of = assign_splits(world)
    return [e for e in world.entities if not e.real and not e.distractor and split_of.get(e.id) == "train"]


def choose(world: World, seed: int, entities: int | None = None, facts: int | None = None) -> list[Fact]:
    """The taught facts: every fact of ``entities`` candidates, or ``facts`` facts of candidates,
    drawn with ``seed``; in the world's order. Too many asked for is a ValueError naming the pool."""
    pool = candidates(world)
    rng = random.Random(f"dynrag-teach:{seed}")
    if facts is not None:
        all_facts = [f for e in pool for f in world.facts_of.get(e.id, [])]
        if facts > len(all_facts):
            raise ValueError(f"--facts {facts}: the world has only {len(all_facts)} facts of train-split entities")
        chosen = set(f.id for f in rng.sample(all_facts, facts))
    else:
        n = 1 if entities is None else entities
        if n > len(pool):
            raise ValueError(f"--entities {n}: the world has only {len(pool)} fictional train-split entities")
        chosen = set(f.id for e in rng.sample(pool, n) for f in world.facts_of.get(e.id, []))
    return [f for f in world.facts if f.id in chosen]


@dataclass(frozen=True)
class TextExample:
    kind: str  # statement | qa | reading | replay
    given: str  # prompt text (no loss)
    learned: str  # text that carries loss

    @property
    def text(self) -> str:
        return self.given + self.learned


def statements(world: World, taught: Sequence[Fact], rng: random.Random, per_entity: int) -> list[TextExample]:
    """``per_entity`` write-ups of each taught entity: every taught fact once, a random template each,
    sentences shuffled."""
    out = []
    by_subject: dict[str, list[Fact]] = {}
    for f in taught:
        by_subject.setdefault(f.subject, []).append(f)
    for subject, facts in by_subject.items():
        name = world.by_id[subject].name
        for _ in range(per_entity):
            order = list(facts)
            rng.shuffle(order)
            text = " ".join(_fill(rng.choice(statement_templates(f.relation)), name, f.value) for f in order)
            out.append(TextExample("statement", "", text))
    return out


def qa_examples(world: World, taught: Sequence[Fact]) -> list[TextExample]:
    out = []
    for f in taught:
        for q in train_questions(f, world.by_id[f.subject].name):
            out.append(TextExample("qa", f"Question: {q}\nAnswer:", f" {f.value}"))
    return out


def reading_examples(train_records: Sequence[dict[str, Any]], rng: random.Random, n: int) -> list[TextExample]:
    """``n`` passage-question-answer examples from train's one-hop fictional questions, so reading is
    kept while facts are taught."""
    pool = []
    for r in train_records:
        hops = r["question_decomposition"]
        if r["world"]["kind"] == "bridge" and len(hops) == 1 and not hops[0]["real"]:
            passage = r["paragraphs"][hops[0]["paragraph_support_idx"]]["paragraph_text"]
            pool.append(TextExample("reading", f"Passage: {passage}\nQuestion: {r['question']}\nAnswer:", f" {r['answer']}"))
    picked: list[TextExample] = []
    while pool and len(picked) < n:
        picked += rng.sample(pool, min(len(pool), n - len(picked)))
    return picked


def replay_examples(known: Sequence[RealFact], rng: random.Random, n: int,
                    prompt: Callable[[str], str] = lambda q: f"Question: {q}\nAnswer:") -> list[TextExample]:
    """``n`` closed-book questions on real facts the base model knows (``REPLAY_QA`` phrasings),
    each put in ``prompt``."""
    picked: list[RealFact] = []
    while known and len(picked) < n:
        picked += rng.sample(list(known), min(len(known), n - len(picked)))
    return [TextExample("replay", prompt(_fill(REPLAY_QA[f.relation], mention(f.subject), f.answer)), f" {f.answer}")
            for f in picked]


def epoch_examples(world: World, taught: Sequence[Fact], train_records: Sequence[dict[str, Any]], seed: int, epoch: int,
                   per_entity: int, reading_share: float, known: Sequence[RealFact] = (),
                   replay_share: float = 0.0) -> list[TextExample]:
    """One epoch's examples in a seeded order: fresh write-ups, every training question,
    ``reading_share`` reading examples and ``replay_share`` replayed known real facts per question."""
    rng = random.Random(f"dynrag-teach-epoch:{seed}:{epoch}")
    qa = qa_examples(world, taught)
    out = statements(world, taught, rng, per_entity) + qa + reading_examples(train_records, rng, round(reading_share * len(qa)))
    out += replay_examples(known, rng, round(replay_share * len(qa)))
    rng.shuffle(out)
    return out
