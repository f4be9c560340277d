"""Part-of-speech tags for English text, and the word classes counted from them.

The tagger is Lingua::EN::Tagger, a bigram tagger trained on the Penn Treebank whose lexicon ships
with it (Debian's ``liblingua-en-tagger-perl``; ``make tagger`` installs it). It runs as a separate
Perl process fed one text per line, so nothing is downloaded at run time and no model file is
unpickled. Its tags are the Penn Treebank's in lower case with a few renamed (``det`` for DT,
``pp``/``ppc``/``ppl``/``ppr``/``pps`` for punctuation, ``prps``/``wps`` for PRP$/WP$);
:func:`penn_tag` maps them back, so everything above this module speaks Penn tags.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from dynrag.errors import ConfigError

TaggedText = list[tuple[str, str]]  # (word, Penn Treebank tag) per token


class PartOfSpeechTagger(Protocol):
    """Tags many texts in one call: one list of (word, Penn tag) per text, in order."""

    def tag_texts(self, texts: Sequence[str]) -> list[TaggedText]: ...


# Lingua::EN::Tagger's own names for the Penn tags it renames.
_RENAMED = {"DET": "DT", "PP": ".", "PPC": ",", "PPD": "$", "PPL": "``", "PPR": "''", "PPS": ":",
            "PRPS": "PRP$", "WPS": "WP$", "LRB": "-LRB-", "RRB": "-RRB-"}


def penn_tag(tag: str) -> str:
    """The Penn Treebank name of one of the tagger's tags (``det`` -> ``DT``, ``prps`` -> ``PRP$``)."""
    upper = tag.upper()
    return _RENAMED.get(upper, upper)


_TAGGED = re.compile(r"<([a-z$]+)>(.*?)</\1>")


def parse_tagged_line(line: str) -> TaggedText:
    """``<wp>Who</wp> <vbd>won</vbd>`` -> [("Who", "WP"), ("won", "VBD")]."""
    return [(word, penn_tag(tag)) for tag, word in _TAGGED.findall(line)]


# What each counted word class is, in Penn tags. Conjunctions are the coordinating ones (and, or,
# but, nor): the counts in DeepRAG's Figure 8 are of "and/or".
WORD_CLASSES: dict[str, frozenset[str]] = {
    "wh_words": frozenset({"WDT", "WP", "WP$", "WRB"}),
    "nouns": frozenset({"NN", "NNS", "NNP", "NNPS"}),
    "verbs": frozenset({"VB", "VBD", "VBG", "VBN", "VBP", "VBZ"}),
    "conjunctions": frozenset({"CC"}),
    "pronouns": frozenset({"PRP", "PRP$"}),
}


@dataclass(frozen=True)
class WordClassCounts:
    wh_words: int
    nouns: int
    verbs: int
    conjunctions: int
    pronouns: int

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in WORD_CLASSES}


def count_word_classes(tagged: TaggedText) -> WordClassCounts:
    """How many tokens of ``tagged`` fall in each class of :data:`WORD_CLASSES`."""
    return WordClassCounts(**{name: sum(1 for _, tag in tagged if tag in tags) for name, tags in WORD_CLASSES.items()})


# Reads one text per line and writes its tagged form on one line (an empty line for an empty text).
_PERL_PROGRAM = r"""
use strict; use warnings; use Lingua::EN::Tagger;
my $tagger = Lingua::EN::Tagger->new(stem => 0);
while (my $line = <STDIN>) {
    chomp $line;
    my $tagged = $line =~ /\S/ ? $tagger->add_tags($line) : "";
    print((defined $tagged ? $tagged : ""), "\n");
}
"""

MISSING = ("part-of-speech tagger: Perl's Lingua::EN::Tagger is not installed (Debian package "
           "liblingua-en-tagger-perl; `make tagger` installs it)")


class LinguaTagger:
    """Lingua::EN::Tagger in one Perl process per call to :meth:`tag_texts`."""

    def __init__(self, perl: str = "perl"):
        self.perl = perl

    def tag_texts(self, texts: Sequence[str]) -> list[TaggedText]:
        if not texts:
            return []
        if shutil.which(self.perl) is None:
            raise ConfigError(f"{MISSING}: no {self.perl!r} on PATH")
        # One line per text: a newline or a tag bracket inside a text would break the framing.
        lines = [re.sub(r"[\r\n<>]+", " ", text) for text in texts]
        done = subprocess.run([self.perl, "-CS", "-e", _PERL_PROGRAM], input="\n".join(lines) + "\n",
                              capture_output=True, text=True, encoding="utf-8")
        if done.returncode != 0:
            if "Lingua/EN/Tagger.pm" in done.stderr:
                raise ConfigError(MISSING)
            raise ConfigError(f"part-of-speech tagger failed: {done.stderr.strip().splitlines()[-1:] or done.returncode}")
        out = done.stdout.split("\n")[: len(lines)]
        if len(out) != len(lines):
            raise ConfigError(f"part-of-speech tagger: {len(lines)} texts in, {len(out)} lines out")
        return [parse_tagged_line(line) for line in out]


__all__ = ["LinguaTagger", "PartOfSpeechTagger", "TaggedText", "WORD_CLASSES", "WordClassCounts",
           "count_word_classes", "parse_tagged_line", "penn_tag"]
