"""Each entity's article: one sentence per fact, from several templates per relation (the choice is
seeded by the fact, so it does not depend on the order facts are written), cut into passages of
``SENTENCES_PER_PASSAGE`` sentences. A fact's supporting passage is the one holding its sentence."""

from __future__ import annotations

import random
from dataclasses import dataclass

from dynrag.datasets.examples import passage_key
from dynrag.world.bank import RELATIONS, mention
from dynrag.world.entities import Fact, World

SENTENCES_PER_PASSAGE = 2

# {s}: the subject's name, {o}: the value; {a}: "a" or "an" before the value.
TEMPLATES: dict[str, tuple[str, ...]] = {
    "born_in": ("{s} was born in {o}.", "{s} came into the world in the town of {o}.",
                "The town of {o} is where {s} was born."),
    "birth_year": ("{s} was born in the year {o}.", "The birth of {s} is recorded in {o}.",
                   "The year of birth of {s} was {o}."),
    "profession": ("{s} worked as {a} {o}.", "By trade, {s} was {a} {o}.", "{s} made a living as {a} {o}."),
    "studied_at": ("{s} studied at {o}.", "{s} was a pupil of {o}.", "As a young person, {s} attended {o}."),
    "works_for": ("{s} was employed by {o}.", "For many years {s} worked for {o}.", "{s} held a post at {o}."),
    "founder": ("{s} was founded by {o}.", "{o} set up {s}.", "The founder of {s} was {o}."),
    "based_in": ("{s} has its offices in {o}.", "{s} is based in the town of {o}.", "The home of {s} is {o}."),
    "founded": ("{s} opened for business in {o}.", "{s} was established in {o}.",
                "The year {s} began trading was {o}."),
    "located_in": ("{s} stands in the town of {o}.", "{s} is a school in {o}.",
                   "Pupils travel to {o} to attend {s}."),
    "first_principal": ("The first principal of {s} was {o}.", "{o} led {s} as its first principal.",
                        "{s} opened under its first principal, {o}."),
    "river": ("The river {o} flows through {s}.", "{s} lies on the banks of the {o}.",
              "{s} grew up beside the {o}."),
    "country": ("{s} is a town in {o}.", "{s} lies in {o}.", "The town of {s} belongs to {o}."),
}


@dataclass(frozen=True)
class WorldPassage:
    id: str  # passage_key(title, text): the id a benchmark loader gives the same paragraph
    title: str
    text: str
    entity: str  # entity id of the article


def stated(relation: str, subject: str, value: str, real: bool, template: int = 0) -> str:
    """The sentence stating that ``subject``'s ``relation`` is ``value``: a bank relation's one
    sentence, or the ``template``-th of a fictional relation's."""
    if real:
        text = RELATIONS[relation].sentence.format(x=mention(subject), y=mention(value))
    else:
        text = TEMPLATES[relation][template].format(s=subject, o=mention(value), a="an" if value[:1] in "aeiou" else "a")
    return text[:1].upper() + text[1:]


def fact_sentence(fact: Fact, subject: str, seed: int) -> str:
    if fact.real:
        return stated(fact.relation, subject, fact.value, True)
    template = random.Random(f"{seed}:{fact.id}").choice(range(len(TEMPLATES[fact.relation])))
    return stated(fact.relation, subject, fact.value, False, template)


def write_articles(world: World) -> tuple[list[WorldPassage], dict[str, int]]:
    """(every passage in entity order, fact id -> index of its supporting passage)."""
    passages: list[WorldPassage] = []
    support: dict[str, int] = {}
    facts_of = world.facts_of
    for entity in world.entities:
        facts = facts_of.get(entity.id, [])
        sentences = [fact_sentence(f, entity.name, world.options.seed) for f in facts]
        for start in range(0, len(sentences), SENTENCES_PER_PASSAGE):
            text = " ".join(sentences[start:start + SENTENCES_PER_PASSAGE])
            for f in facts[start:start + SENTENCES_PER_PASSAGE]:
                support[f.id] = len(passages)
            passages.append(WorldPassage(passage_key(entity.name, text), entity.name, text, entity.id))
    return passages, support
