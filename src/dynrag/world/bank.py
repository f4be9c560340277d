"""The bank of real-world facts a knowledge-controlled world bridges to, in the project's own words.

Each relation has three phrasings the probe asks (``probe``) and a fourth it never asks
(``held_out``), which the world's questions and ``world check`` use. A relation whose answer is
itself a subject of the bank names that subject's kind (``object_kind``) and a noun phrase for
nesting it in a multi-hop question (``noun``, "the capital city of {x}"), so chains can run among
real entities only ("Name the currency of the country whose capital is Lima.").
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
    object_kind: str | None = None  # the kind of bank subject the answer names, if chains go on from it
    noun: str | None = None  # "{x}'s answer" as a noun phrase, for nesting


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
                 "Name the capital city of {x}.", "The seat of government of {x} is {y}.",
                 "city", "the capital city of {x}"),
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
                 "Name the writer of {x}.", "{x} is a book by {y}.", "writer", "the writer of {x}"),
    RealRelation("capital_of", "city",
                 ("Which country has {x} as its capital?", "{x} is the capital of which country?",
                  "Of which country is {x} the capital city?"),
                 "Name the country whose capital is {x}.", "{x} is the capital city of {y}.",
                 "country", "the country whose capital is {x}"),
    RealRelation("homeland", "writer",
                 ("Which country did {x} come from?", "{x} was from which country?",
                  "What was the home country of {x}?"),
                 "Name the country {x} came from.", "{x} came from {y}.", "country", "the country {x} came from"),
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

_UK = "United Kingdom|England|Britain|Great Britain|UK"
_BOOKS = (  # book, writer, the writer's country
    ("Pride and Prejudice", "Jane Austen|Austen", _UK),
    ("War and Peace", "Leo Tolstoy|Tolstoy", "Russia"),
    ("Don Quixote", "Miguel de Cervantes|Cervantes", "Spain"),
    ("Moby-Dick", "Herman Melville|Melville", "United States|America|USA"),
    ("Nineteen Eighty-Four", "George Orwell|Orwell", _UK),
    ("The Odyssey", "Homer", "Greece|Ancient Greece"),
    ("Romeo and Juliet", "William Shakespeare|Shakespeare", _UK),
    ("Oliver Twist", "Charles Dickens|Dickens", _UK),
    ("Crime and Punishment", "Fyodor Dostoevsky|Dostoevsky", "Russia"),
    ("The Old Man and the Sea", "Ernest Hemingway|Hemingway", "United States|America|USA"),
    ("Frankenstein", "Mary Shelley|Shelley", _UK),
    ("The Divine Comedy", "Dante Alighieri|Dante", "Italy"),
    ("Les Misérables", "Victor Hugo|Hugo", "France"),
    ("The Adventures of Tom Sawyer", "Mark Twain|Twain", "United States|America|USA"),
    ("Alice's Adventures in Wonderland", "Lewis Carroll|Carroll", _UK),
    ("On the Origin of Species", "Charles Darwin|Darwin", _UK),
    ("The Little Prince", "Antoine de Saint-Exupéry|Saint-Exupéry|Antoine de Saint-Exupery", "France"),
    ("Faust", "Johann Wolfgang von Goethe|Goethe", "Germany"),
    ("One Hundred Years of Solitude", "Gabriel García Márquez|García Márquez|Gabriel Garcia Marquez|Marquez", "Colombia"),
    ("Madame Bovary", "Gustave Flaubert|Flaubert", "France"),
    ("The Count of Monte Cristo", "Alexandre Dumas|Dumas", "France"),
    ("The Adventures of Pinocchio", "Carlo Collodi|Collodi", "Italy"),
    ("Jane Eyre", "Charlotte Brontë|Charlotte Bronte|Brontë", _UK),
    ("Dracula", "Bram Stoker|Stoker", "Ireland"),
    ("Ulysses", "James Joyce|Joyce", "Ireland"),
    ("Robinson Crusoe", "Daniel Defoe|Defoe", _UK),
    ("Gulliver's Travels", "Jonathan Swift|Swift", "Ireland"),
    ("The Name of the Rose", "Umberto Eco|Eco", "Italy"),
    ("Doctor Zhivago", "Boris Pasternak|Pasternak", "Russia"),
    ("Things Fall Apart", "Chinua Achebe|Achebe", "Nigeria"),
    ("The Alchemist", "Paulo Coelho|Coelho", "Brazil"),
    ("A Doll's House", "Henrik Ibsen|Ibsen", "Norway"),
    ("Pippi Longstocking", "Astrid Lindgren|Lindgren", "Sweden"),
    ("The Great Gatsby", "F. Scott Fitzgerald|Scott Fitzgerald|Fitzgerald", "United States|America|USA"),
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
    ("Berlin", "Spree|River Spree"), ("Moscow", "Moskva|Moskva River|Moscow River"), ("Dublin", "Liffey|River Liffey"),
    ("Kyiv", "Dnieper|Dnipro|Dnieper River"), ("Seoul", "Han|Han River"), ("Bangkok", "Chao Phraya|Chao Phraya River"),
    ("Amsterdam", "Amstel|River Amstel"),
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
    facts += [_fact("author", book, author) for book, author, _ in _BOOKS]
    facts += [_fact("symbol", element, symbol) for element, symbol in _ELEMENTS]
    facts += [_fact("river", city, river) for city, river in _CITIES]
    # The links back, from each capital and each writer to their country: with the capital and
    # author facts, chains can run among real subjects only.
    facts += [_fact("capital_of", capital.split("|")[0], country) for country, capital, *_ in _COUNTRIES]
    facts += [_fact("homeland", author.split("|")[0], country) for _, author, country in _BOOKS]
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
    """Every real subject in the bank -> its kind (country, book, element, city, writer)."""
    return {f.subject: RELATIONS[f.relation].subject_kind for f in BANK}


def phrasings(fact: RealFact) -> tuple[str, str, str]:
    """The three probe questions of ``fact``."""
    return tuple(_upper_first(p.format(x=mention(fact.subject))) for p in RELATIONS[fact.relation].probe)  # type: ignore[return-value]


def held_out_question(fact: RealFact) -> str:
    return _upper_first(RELATIONS[fact.relation].held_out.format(x=mention(fact.subject)))


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]
