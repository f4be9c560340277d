"""Questions over the world: bridge chains of 1 to 3 hops and comparisons, each with its gold
decomposition (one sub-question per hop, ``#k`` standing for the k-th hop's answer).

A chain starts at an entity of the main cluster or at a real subject of the bank and follows facts
whose value is another entity; it never visits an entity twice and never chains a fact the probe
left out. So chains are invented (all hops invented facts), real (all hops bank facts: "the country
whose capital is Lima") or mixed (an invented town's real country, then that country's facts). Its question nests each hop as a noun phrase inside the last hop's
question: "In which country does the town where the founder of Zorlak Mills was born lie?".
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from dynrag.world.bank import RELATIONS, mention
from dynrag.world.entities import Entity, Fact, World
from dynrag.world.knowledge import Knowledge

# relation -> (question about {x}, noun phrase for {x}'s value or None when it ends a chain)
FICTIONAL: dict[str, tuple[str, str | None]] = {
    "born_in": ("In which town was {x} born?", "the town where {x} was born"),
    "birth_year": ("In which year was {x} born?", None),
    "profession": ("What was the profession of {x}?", None),
    "studied_at": ("At which school did {x} study?", "the school where {x} studied"),
    "works_for": ("Which company did {x} work for?", "the company {x} worked for"),
    "founder": ("Who founded {x}?", "the founder of {x}"),
    "based_in": ("In which town is {x} based?", "the town where {x} is based"),
    "founded": ("In which year was {x} founded?", None),
    "located_in": ("In which town is {x}?", "the town where {x} stands"),
    "first_principal": ("Who was the first principal of {x}?", "the first principal of {x}"),
    "river": ("Which river flows through {x}?", None),
    "country": ("In which country does {x} lie?", "the country where {x} lies"),
}
COMPARISONS = {"company": ("founded", "Which was founded first, {a} or {b}?"),
               "person": ("birth_year", "Who was born first, {a} or {b}?")}
SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class Question:
    kind: str  # bridge | comparison
    question: str
    answers: tuple[str, ...]
    hops: tuple[Fact, ...]
    subquestions: tuple[str, ...]
    start: str  # entity id whose split the question takes
    split: str = ""


def hop_question(fact: Fact, subject: str) -> str:
    if fact.real:
        template = RELATIONS[fact.relation].held_out
    else:
        template = FICTIONAL[fact.relation][0]
    text = template.format(x=mention(subject) if fact.real else subject)
    return text[:1].upper() + text[1:]


def noun_phrase(fact: Fact) -> str | None:
    """The fact's answer as a noun phrase about {x} ("the town where {x} was born"), or None when a
    chain cannot nest it."""
    return RELATIONS[fact.relation].noun if fact.real else FICTIONAL[fact.relation][1]


def phrase_chain(hops: tuple[Fact, ...], start_name: str) -> tuple[str, tuple[str, ...]]:
    """(the nested question, one sub-question per hop)."""
    subject = start_name
    for fact in hops[:-1]:
        subject = noun_phrase(fact).format(x=mention(subject) if fact.real else subject)  # type: ignore[union-attr]
    subs = tuple(hop_question(f, start_name if i == 0 else f"#{i}") for i, f in enumerate(hops))
    return hop_question(hops[-1], subject), subs


def chains(world: World, start: Entity, knowledge: Knowledge, longest: int = 3) -> list[tuple[Fact, ...]]:
    """Every chain of 1..longest usable facts from ``start``, depth first in the world's fact order."""
    out: list[tuple[Fact, ...]] = []
    facts_of = world.facts_of

    def walk(entity_id: str, path: tuple[Fact, ...], seen: frozenset[str]) -> None:
        for fact in facts_of.get(entity_id, []):
            if not knowledge.usable(fact) or (fact.object is not None and fact.object in seen):
                continue
            chain = path + (fact,)
            out.append(chain)
            if fact.object is not None and noun_phrase(fact) is not None and len(chain) < longest:
                walk(fact.object, chain, seen | {fact.object})

    walk(start.id, (), frozenset({start.id}))
    return out


def assign_splits(world: World) -> dict[str, str]:
    """Start entity id -> split, kind by kind, from a shuffle seeded by the world's seed."""
    rng = random.Random(f"dynrag-world-splits:{world.options.seed}")
    out: dict[str, str] = {}
    kinds = sorted({(e.real, e.kind) for e in world.entities if not e.distractor})
    for real, kind in kinds:
        ids = [e.id for e in world.entities if e.kind == kind and e.real == real and not e.distractor]
        rng.shuffle(ids)
        cut_train = round(len(ids) * world.options.train_share)
        cut_dev = cut_train + max(1, round(len(ids) * world.options.dev_share)) if len(ids) >= 3 else cut_train
        for i, entity_id in enumerate(ids):
            out[entity_id] = "train" if i < cut_train else "dev" if i < cut_dev else "test"
    return out


def _comparisons(world: World, split_of: dict[str, str], rng: random.Random) -> list[Question]:
    out: list[Question] = []
    for kind, (relation, template) in COMPARISONS.items():
        members = [e for e in world.entities if e.kind == kind and not e.distractor and not e.real]
        year = {e.id: f for e in members for f in world.facts_of[e.id] if f.relation == relation}
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                fa, fb = year[a.id], year[b.id]
                if split_of[a.id] != split_of[b.id] or fa.value == fb.value:
                    continue
                first, second = (a, b) if rng.random() < 0.5 else (b, a)
                f1, f2 = year[first.id], year[second.id]
                earlier = first if int(f1.value) < int(f2.value) else second
                out.append(Question("comparison", template.format(a=first.name, b=second.name), (earlier.name,),
                                    (f1, f2), (hop_question(f1, first.name), hop_question(f2, second.name)),
                                    first.id, split_of[first.id]))
    return out


def chain_group(chain: tuple[Fact, ...]) -> str:
    """invented (every hop an invented fact), real (every hop a bank fact) or mixed."""
    real = sum(f.real for f in chain)
    return "real" if real == len(chain) else "mixed" if real else "invented"


def make_questions(world: World, knowledge: Knowledge) -> list[Question]:
    """The world's questions in a fixed order: 1-, 2-, 3-hop bridges, then comparisons. Each hop
    count and group (invented, mixed, real; ``chain_group``) is a seeded sample of at most
    ``options.questions`` (one hop: twice that; comparisons: ``options.comparisons``): drawn from
    one pool, the few chains that cross from invented to real facts would be swamped."""
    rng = random.Random(f"dynrag-world-questions:{world.options.seed}")
    split_of = assign_splits(world)
    pools: dict[tuple[int, str], list[Question]] = {}
    for entity in world.entities:
        if entity.distractor:
            continue
        for chain in chains(world, entity, knowledge):
            text, subs = phrase_chain(chain, entity.name)
            q = Question("bridge", text, chain[-1].answers, chain, subs, entity.id, split_of[entity.id])
            pools.setdefault((len(chain), chain_group(chain)), []).append(q)
    out: list[Question] = []
    for key in sorted(pools):
        pool = pools[key]
        cap = world.options.questions * (2 if key[0] == 1 else 1)  # one-hop: what `check` measures
        picked = sorted(rng.sample(range(len(pool)), min(cap, len(pool))))
        out += [pool[i] for i in picked]
    pairs = _comparisons(world, split_of, rng)
    out += [pairs[i] for i in sorted(rng.sample(range(len(pairs)), min(world.options.comparisons, len(pairs))))]
    return out
