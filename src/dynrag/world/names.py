"""Fictional names from a seeded syllable generator, unique among themselves and never a real word.

A word is refused when it is (case-insensitively) a stopword (``dynrag.text.stopwords``), one of
the common English words in ``COMMON_WORDS`` below, or a word of a real fact in the bank (a
country, a capital, an author...), so a fictional name never reads as something the model may
already know. The bundled tokenizer's vocabulary is not consulted: it would tie a pure generator
to model files.
"""

from __future__ import annotations

import random
from functools import cache

from dynrag.world.bank import BANK

_ONSETS = ("b", "br", "d", "dr", "f", "g", "gr", "h", "k", "kr", "l", "m", "n", "p", "pr", "r", "s",
           "st", "t", "tr", "v", "z", "th", "sk", "bl", "ch")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ei", "ou", "ae", "ia")
_CODAS = ("", "", "", "n", "r", "l", "s", "th", "k", "m", "nd", "rn", "sk", "v", "x")

COMMON_WORDS = frozenset("""
able about above act add age ago air all also am an and any are area arm art as ask at away baby back
bad bag ball band bank bar base bath bear beat bed bee beer bell belt bend best bet big bill bird bit
bite black blade blue board boat body bone book boot born boss both bowl box boy brain bread break
brick bride brush burn bus bush busy but buy cake call calm camp can cap car card care case cash cat
cave cell chain chair chin cold come cook cool cope core corn cost crew crop cry cup cut dam dark date
day dead deal dear deep deer den desk dine dish dock dog door dose down draw dream dress drink drive
drop drum dry duck due dull dust duty each ear earn east easy eat edge egg else end even ever evil
face fact fail fair fall fame far farm fast fate fear feed feel fell fern file fill film find fine
fire firm fish fist five flag flat flow fold folk food fool foot form fort four free frog from fun
fur gain game gap gate gear gift girl give glad goal goat gold golf gone good gown grab gray grin grow
gun hair half hall hand hang hard harm hat hate head hear heat held help herd here hero hide high hill
hint hire hold hole home hook hope horn host hour huge hunt hurt ice idea inch iron item jail job join
joke jump just keen keep kick kid kill kind king kiss kite knee knot lab lack lady lake lamb lamp land
lane last late lava law lay lead leaf lean left leg lend less lid lie life lift like lime line link
lion lip list live load loan lock long look lord lose loss lost lot loud love luck lung main make male
man many map mark mask mass mat meal mean meat meet melt menu mild milk mill mind mine miss mist mix
mode mole moon more moss most moth much mud mule must myth nail name near neat neck need nest net new
news nice nine node none noon norm nose note noun odd off oil old once one only open oven over pace
pack page pain pair pale palm pan park part pass past path peak pear pen pet pick pie pig pile pin
pine pink pipe pit plan play plot plug plum poem poet pole pool poor pop pork port pose post pot pour
pray prey pull pump pure push rain rake ran rank rare rat raw read real rest rice rich ride ring rise
risk road rock role roll roof room root rope rose rub rude rule run rush sad safe sail salt same sand
save say sea seal seat see seed seek seem self sell send sent set shed ship shoe shop shot show shut
sick side sign silk sing sink sir sit six size ski skin sky slip slow snow soap sock soft soil sold
some son song soon sore sort soul soup sour spin spot star stay stem step stop such suit sun sure swim
tail take tale talk tall tank tap tape task taxi tea team tear tell ten tend tent term test text than
that then they thin this tide tie tile till time tin tiny tip tire toe told tone tool top torn toss
tour town toy tray tree trip true tube tune turn twin type ugly unit upon urge use vain van vase vast
verb very vest view vine visa void vote wage wait wake walk wall want war warm wash wave way weak wear
week well west wet what when whip wide wife wild will win wind wine wing wire wise wish with wolf wood
wool word work worm wrap yard year yell yes yet zero zone
""".split())


@cache
def reserved_words() -> frozenset[str]:
    """Every word a fictional name must not be (lower case)."""
    from dynrag.text.stopwords import stopwords

    bank_words = {w.lower().strip("'.,") for f in BANK for text in (f.subject, *f.answers) for w in text.split()}
    return frozenset(stopwords()) | COMMON_WORDS | frozenset(bank_words)


class NameMaker:
    """Invented words from one seeded generator; each word is handed out once."""

    def __init__(self, seed: str, reserved: frozenset[str] | None = None):
        self._rng = random.Random(seed)
        self._reserved = reserved_words() if reserved is None else reserved
        self._used: set[str] = set()

    def word(self, syllables: tuple[int, int] = (2, 3)) -> str:
        """A new capitalised word of ``syllables`` syllables (inclusive range)."""
        for _ in range(10_000):
            n = self._rng.randint(*syllables)
            parts = [self._rng.choice(_ONSETS) + self._rng.choice(_VOWELS) for _ in range(n)]
            parts[-1] += self._rng.choice(_CODAS)
            text = "".join(parts)
            if 4 <= len(text) <= 11 and text not in self._used and text not in self._reserved:
                self._used.add(text)
                return text.capitalize()
        raise RuntimeError("the syllable generator ran out of new words")  # pragma: no cover

    def person(self) -> str:
        return f"{self.word((2, 2))} {self.word((2, 3))}"
