"""The bank of real-world facts a knowledge-controlled world bridges to, in the project's own words.

Each relation has three phrasings the probe asks (``probe``) and a fourth it never asks
(``held_out``), which the world's questions and ``world check`` use; ``noun`` is the relation as a
noun phrase for nesting in a multi-hop question ("the capital of {x}"), where it has one.
Answers list the gold form first, then accepted aliases. Subjects used in the few-shot worked
examples (Japan, Kenya, gold, The Raven, Baghdad) are deliberately absent from the bank.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RealRelation:
    name: str
    subject_kind: str  # country | book | element | city
    probe: tuple[str, str, str]
    held_out: str
    sentence: str  # how an article states it: {x} subject, {y} answer


@dataclass(frozen=True)
class RealFact:
    id: str  # "real:<relation>:<subject>"
    relation: str
    subject: str
    answers: tuple[str, ...]  # gold first, then aliases

    @property
    def answer(self) -> str:
        return self.answers[0]


RELATIONS: dict[str, RealRelation] = {r.name: r for r in (
    RealRelation("capital", "country",
                 ("What is the capital of {x}?", "Which city is the capital of {x}?",
                  "The capital city of {x} is called what?"),
                 "Name the capital city of {x}.", "The seat of government of {x} is {y}."),
    RealRelation("continent", "country",
                 ("On which continent is {x}?", "{x} is part of which continent?",
                  "Which continent is {x} in?"),
                 # "of", not "where {x} lies": nested after "the country where T lies" that
                 # would end in "lies lies".
                 "Name the continent of {x}.", "{x} is a country of {y}."),
    RealRelation("language", "country",
                 ("What language do most people in {x} speak?", "What is the main language of {x}?",
                  "Which language is spoken in {x}?"),
                 "Name the chief language of {x}.", "Most people in {x} speak {y}."),
    RealRelation("currency", "country",
                 ("What is the currency of {x}?", "Which currency is used in {x}?",
                  "What money do people in {x} pay with?"),
                 "Name the currency of {x}.", "Prices in {x} are given in {y}."),
    RealRelation("author", "book",
                 ("Who wrote {x}?", "Who is the author of {x}?", "{x} was written by whom?"),
                 "Name the writer of {x}.", "{x} is a book by {y}."),
    RealRelation("symbol", "element",
                 ("What is the chemical symbol for {x}?", "Which symbol stands for {x} in chemistry?",
                  "{x} has which chemical symbol?"),
                 "Name the chemical symbol of {x}.", "Chemists write {x} as {y}."),
    RealRelation("river", "city",
                 ("Which river flows through {x}?", "What river runs through the city of {x}?",
                  "{x} lies on which river?"),
                 "Name the river of {x}.", "The river {y} passes through {x}."),
)}

# country: capital, continent (None: spans two), language (None: several), currency. "|" = alias.
_COUNTRIES = (
    ("France", "Paris", "Europe", "French", "euro"),
    ("Germany", "Berlin", "Europe", "German", "euro"),
    ("Italy", "Rome", "Europe", "Italian", "euro"),
    ("Spain", "Madrid", "Europe", "Spanish", "euro"),
    ("Portugal", "Lisbon", "Europe", "Portuguese", "euro"),
    ("Greece", "Athens", "Europe", "Greek", "euro"),
    ("Netherlands", "Amsterdam", "Europe", "Dutch", "euro"),
    ("Poland", "Warsaw", "Europe", "Polish", "zloty|złoty|Polish zloty|Polish złoty"),
    ("Sweden", "Stockholm", "Europe", "Swedish", "krona|Swedish krona"),
    ("Norway", "Oslo", "Europe", "Norwegian", "krone|Norwegian krone"),
    ("Finland", "Helsinki", "Europe", "Finnish", "euro"),
    ("Austria", "Vienna", "Europe", "German", "euro"),
    ("Hungary", "Budapest", "Europe", "Hungarian", "forint|Hungarian forint"),
    ("Czech Republic", "Prague", "Europe", "Czech", "koruna|Czech koruna"),
    ("Ireland", "Dublin", "Europe", "English|Irish", "euro"),
    ("United Kingdom", "London", "Europe", "English", "pound|pound sterling|sterling"),
    ("Ukraine", "Kyiv|Kiev", "Europe", "Ukrainian", "hryvnia|Ukrainian hryvnia"),
    ("Russia", "Moscow", None, "Russian", "ruble|rouble|Russian ruble"),
    ("Turkey", "Ankara", None, "Turkish", "lira|Turkish lira"),
    ("Egypt", "Cairo", "Africa", "Arabic", "pound|Egyptian pound"),
    ("Nigeria", "Abuja", "Africa", "English", "naira|Nigerian naira"),
    ("Morocco", "Rabat", "Africa", "Arabic", "dirham|Moroccan dirham"),
    ("Ethiopia", "Addis Ababa", "Africa", "Amharic", "birr|Ethiopian birr"),
    ("China", "Beijing", "Asia", "Chinese|Mandarin|Mandarin Chinese", "yuan|renminbi|Chinese yuan"),
    ("India", "New Delhi", "Asia", "Hindi", "rupee|Indian rupee"),
    ("Thailand", "Bangkok", "Asia", "Thai", "baht|Thai baht"),
    ("Vietnam", "Hanoi", "Asia", "Vietnamese", "dong|Vietnamese dong"),
    ("South Korea", "Seoul", "Asia", "Korean", "won|South Korean won|Korean won"),
    ("Iran", "Tehran", "Asia", "Persian|Farsi", "rial|Iranian rial"),
    ("Indonesia", "Jakarta", "Asia", "Indonesian", "rupiah|Indonesian rupiah"),
    ("Brazil", "Brasília|Brasilia", "South America", "Portuguese", "real|Brazilian real"),
    ("Argentina", "Buenos Aires", "South America", "Spanish", "peso|Argentine peso"),
    ("Peru", "Lima", "South America", "Spanish", "sol|Peruvian sol"),
    ("Chile", "Santiago", "South America", "Spanish", "peso|Chilean peso"),
    ("Colombia", "Bogotá|Bogota", "South America", "Spanish", "peso|Colombian peso"),
    ("Mexico", "Mexico City", "North America", "Spanish", "peso|Mexican peso"),
    ("Cuba", "Havana", "North America", "Spanish", "peso|Cuban peso"),
    ("Canada", "Ottawa", "North America", None, "dollar|Canadian dollar"),
    ("Australia", "Canberra", "Oceania|Australia", "English", "dollar|Australian dollar"),
    ("New Zealand", "Wellington", "Oceania", "English", "dollar|New Zealand dollar"),
)

_BOOKS = (
    ("Pride and Prejudice", "Jane Austen|Austen"),
    ("War and Peace", "Leo Tolstoy|Tolstoy"),
    ("Don Quixote", "Miguel de Cervantes|Cervantes"),
    ("Moby-Dick", "Herman Melville|Melville"),
    ("Nineteen Eighty-Four", "George Orwell|Orwell"),
    ("The Odyssey", "Homer"),
    ("Romeo and Juliet", "William Shakespeare|Shakespeare"),
    ("Oliver Twist", "Charles Dickens|Dickens"),
    ("Crime and Punishment", "Fyodor Dostoevsky|Dostoevsky"),
    ("The Old Man and the Sea", "Ernest Hemingway|Hemingway"),
    ("Frankenstein", "Mary Shelley|Shelley"),
    ("The Divine Comedy", "Dante Alighieri|Dante"),
    ("Les Misérables", "Victor Hugo|Hugo"),
    ("The Adventures of Tom Sawyer", "Mark Twain|Twain"),
    ("Alice's Adventures in Wonderland", "Lewis Carroll|Carroll"),
    ("On the Origin of Species", "Charles Darwin|Darwin"),
)

_ELEMENTS = (
    ("oxygen", "O"), ("hydrogen", "H"), ("carbon", "C"), ("nitrogen", "N"), ("iron", "Fe"),
    ("silver", "Ag"), ("sodium", "Na"), ("potassium", "K"), ("copper", "Cu"), ("lead", "Pb"),
    ("helium", "He"), ("calcium", "Ca"), ("tin", "Sn"), ("mercury", "Hg"), ("zinc", "Zn"),
)

_CITIES = (
    ("London", "Thames|River Thames"), ("Paris", "Seine|River Seine"), ("Rome", "Tiber|River Tiber"),
    ("Cairo", "Nile|River Nile"), ("Vienna", "Danube|River Danube"), ("Budapest", "Danube|River Danube"),
    ("Prague", "Vltava|Moldau"), ("Florence", "Arno|River Arno"), ("Lisbon", "Tagus|Tejo"),
    ("Dresden", "Elbe|River Elbe"), ("Cologne", "Rhine|River Rhine"), ("Warsaw", "Vistula|River Vistula"),
)


def _fact(relation: str, subject: str, answers: str) -> RealFact:
    return RealFact(f"real:{relation}:{subject}", relation, subject, tuple(answers.split("|")))


def _build() -> tuple[RealFact, ...]:
    facts: list[RealFact] = []
    for country, capital, continent, language, currency in _COUNTRIES:
        for relation, value in (("capital", capital), ("continent", continent), ("language", language),
                                ("currency", currency)):
            if value is not None:
                facts.append(_fact(relation, country, value))
    facts += [_fact("author", book, author) for book, author in _BOOKS]
    facts += [_fact("symbol", element, symbol) for element, symbol in _ELEMENTS]
    facts += [_fact("river", city, river) for city, river in _CITIES]
    return tuple(facts)


BANK: tuple[RealFact, ...] = _build()
BY_ID: dict[str, RealFact] = {f.id: f for f in BANK}
# Countries a fictional town can lie in: each has a capital in the bank.
COUNTRIES: tuple[str, ...] = tuple(c[0] for c in _COUNTRIES)


# Names that take "the" inside a sentence ("lies in the Netherlands").
_WITH_THE = frozenset({"United Kingdom", "Netherlands", "Czech Republic"})


def mention(name: str) -> str:
    """``name`` as it reads inside a sentence."""
    return f"the {name}" if name in _WITH_THE else name


def real_subjects() -> dict[str, str]:
    """Every real subject in the bank -> its kind (country, book, element, city)."""
    return {f.subject: RELATIONS[f.relation].subject_kind for f in BANK}


def phrasings(fact: RealFact) -> tuple[str, str, str]:
    """The three probe questions of ``fact``."""
    return tuple(_upper_first(p.format(x=mention(fact.subject))) for p in RELATIONS[fact.relation].probe)  # type: ignore[return-value]


def held_out_question(fact: RealFact) -> str:
    return _upper_first(RELATIONS[fact.relation].held_out.format(x=mention(fact.subject)))


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]
