"""The world's typed entities and facts, drawn from one seed (pure: same options, same world).

People are born in a town, studied at a school, worked for a company, have a profession and a
birth year; companies have a founder, a home town and a founding year; schools a town and a first
principal; towns a river and a real country, the bridge to the real-fact bank. A second, smaller
cluster of the same shape is made of distractors: entities with articles that no question asks
about (they link only among themselves and to real countries).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import cached_property

from pydantic import Field, model_validator

from dynrag.registry import Options
from dynrag.world.bank import BANK, COUNTRIES, RELATIONS, RealFact, real_subjects
from dynrag.world.names import NameMaker

PROFESSIONS = ("baker", "engineer", "teacher", "architect", "surgeon", "painter", "carpenter", "chemist",
               "lawyer", "sailor", "printer", "botanist")
COMPANY_KINDS = ("Works", "Mills", "Shipping", "Foundry", "Brewing", "Textiles", "Instruments", "Press")
SCHOOL_KINDS = ("Academy", "College", "Grammar School", "Institute")


class WorldOptions(Options):
    """What ``dynrag world make`` builds; the seed and these sizes fix every byte of the world."""

    seed: int = 1
    people: int = Field(90, ge=2)
    companies: int = Field(30, ge=2)
    schools: int = Field(15, ge=1)
    towns: int = Field(30, ge=1)
    distractor_share: float = Field(0.5, ge=0.0, le=2.0)  # distractor cluster size / main cluster size
    real_facts: int = Field(200, ge=0)  # bank facts beyond those of the towns' countries
    questions: int = Field(200, ge=1)  # most questions per hop count (1, 2, 3)
    comparisons: int = Field(60, ge=0)
    # Questions are split by their first entity; test takes what train and dev leave. A third of the
    # questions or more in test gives the claims several hundred questions at the default sizes.
    train_share: float = Field(0.5, gt=0.0, lt=1.0)
    dev_share: float = Field(0.15, ge=0.0, lt=1.0)

    @model_validator(mode="after")
    def _test_keeps_a_share(self) -> "WorldOptions":
        if self.train_share + self.dev_share >= 1.0:
            raise ValueError(f"train_share + dev_share must leave a share for test (got {self.train_share} + {self.dev_share})")
        return self


@dataclass(frozen=True)
class Entity:
    id: str  # person-003, dtown-001 (a distractor), country:France (real)
    kind: str  # person | company | school | town | country | book | element | city
    name: str
    distractor: bool = False
    real: bool = False


@dataclass(frozen=True)
class Fact:
    id: str  # "<subject id>:<relation>", or the bank's "real:<relation>:<subject>"
    subject: str  # entity id
    relation: str
    value: str  # the answer as written
    object: str | None = None  # entity id when the value is an entity of the world
    aliases: tuple[str, ...] = ()
    real: bool = False

    @property
    def answers(self) -> tuple[str, ...]:
        return (self.value, *self.aliases)


@dataclass(frozen=True)
class World:
    options: WorldOptions
    entities: tuple[Entity, ...]
    facts: tuple[Fact, ...]

    @cached_property
    def by_id(self) -> dict[str, Entity]:
        return {e.id: e for e in self.entities}

    @cached_property
    def facts_of(self) -> dict[str, list[Fact]]:
        """Entity id -> its facts, in the world's order."""
        out: dict[str, list[Fact]] = {}
        for f in self.facts:
            out.setdefault(f.subject, []).append(f)
        return out


def _cluster(rng: random.Random, names: NameMaker, prefix: str, sizes: dict[str, int],
             distractor: bool) -> tuple[list[Entity], list[Fact]]:
    entities: list[Entity] = []
    facts: list[Fact] = []

    def add(kind: str, i: int, name: str) -> str:
        entity_id = f"{prefix}{kind}-{i:03d}"
        entities.append(Entity(entity_id, kind, name, distractor=distractor))
        return entity_id

    def link(subject: str, relation: str, obj: str) -> None:
        facts.append(Fact(f"{subject}:{relation}", subject, relation, _name(entities, obj), obj))

    def value(subject: str, relation: str, text: str, aliases: tuple[str, ...] = ()) -> None:
        facts.append(Fact(f"{subject}:{relation}", subject, relation, text, None, aliases))

    towns = [add("town", i, names.word()) for i in range(sizes["towns"])]
    people = [add("person", i, names.person()) for i in range(sizes["people"])]
    schools = [add("school", i, f"{names.word()} {rng.choice(SCHOOL_KINDS)}") for i in range(sizes["schools"])]
    companies = [add("company", i, f"{names.word()} {rng.choice(COMPANY_KINDS)}") for i in range(sizes["companies"])]
    for town in towns:
        river = names.word((1, 2))
        value(town, "river", river, (f"River {river}", f"{river} River"))
        country = rng.choice(COUNTRIES)
        facts.append(Fact(f"{town}:country", town, "country", country, f"country:{country}"))
    years: dict[str, int] = {}
    for person in people:
        link(person, "born_in", rng.choice(towns))
        years[person] = rng.randint(1840, 1960)
        value(person, "birth_year", str(years[person]))
        value(person, "profession", rng.choice(PROFESSIONS))
    for school in schools:
        link(school, "located_in", rng.choice(towns))
        link(school, "first_principal", rng.choice(people))
    for company in companies:
        founder = rng.choice(people)
        link(company, "founder", founder)
        link(company, "based_in", rng.choice(towns))
        value(company, "founded", str(years[founder] + rng.randint(24, 55)))
    for person in people:
        link(person, "studied_at", rng.choice(schools))
        link(person, "works_for", rng.choice(companies))
    return entities, facts


def _name(entities: list[Entity], entity_id: str) -> str:
    return next(e.name for e in entities if e.id == entity_id)


def _real_object(fact: RealFact, present: set[str]) -> str | None:
    """The entity a real fact's answer names (the capital's city, the book's writer), when the
    world holds that entity; a chain can go on from it."""
    kind = RELATIONS[fact.relation].object_kind
    entity_id = f"{kind}:{fact.answer}"
    return entity_id if kind is not None and entity_id in present else None


def _real_selection(rng: random.Random, countries: set[str], extra: int) -> list[RealFact]:
    needed = [f for f in BANK if f.subject in countries and f.relation != "river"]
    rest = [f for f in BANK if f not in needed]
    chosen = set(f.id for f in needed) | set(f.id for f in rng.sample(rest, min(extra, len(rest))))
    return [f for f in BANK if f.id in chosen]  # bank order


def generate(options: WorldOptions) -> World:
    """The entities and facts of the world ``options`` describes."""
    rng = random.Random(f"dynrag-world:{options.seed}")
    names = NameMaker(f"dynrag-world-names:{options.seed}")
    sizes = {k: getattr(options, k) for k in ("people", "companies", "schools", "towns")}
    entities, facts = _cluster(rng, names, "", sizes, distractor=False)
    if options.distractor_share > 0:
        small = {k: max(1, math.ceil(v * options.distractor_share)) for k, v in sizes.items()}
        d_entities, d_facts = _cluster(rng, names, "d", small, distractor=True)
        entities, facts = entities + d_entities, facts + d_facts
    countries = {f.value for f in facts if f.relation == "country"}
    kinds = real_subjects()
    real = _real_selection(rng, countries, options.real_facts)
    for subject in dict.fromkeys(f.subject for f in real):
        entities.append(Entity(f"{kinds[subject]}:{subject}", kinds[subject], subject, real=True))
    present = {f"{kinds[f.subject]}:{f.subject}" for f in real}
    for f in real:
        facts.append(Fact(f.id, f"{kinds[f.subject]}:{f.subject}", f.relation, f.answer, _real_object(f, present),
                          f.answers[1:], real=True))
    return World(options, tuple(entities), tuple(facts))
