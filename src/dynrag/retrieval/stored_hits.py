"""Hits made in bulk from rows of a passage store: ``StoredHit`` reads its strings from the store
when first asked for, and ``new_hit`` makes an eager ``Hit`` faster than its constructor."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from itertools import repeat
from typing import ClassVar

from dynrag.retrieval.base import Hit
from dynrag.retrieval.passage_lines import PassageLines


def _fast_hit_factory() -> Callable[[str, str, str, float], Hit]:
    # Hit is a frozen dataclass, whose __init__ goes through object.__setattr__ per field;
    # filling its slots directly is about twice as fast, which shows at 10+ hits per query.
    slots = getattr(Hit, "__slots__", ())
    if tuple(slots) != ("id", "title", "text", "score"):
        return Hit  # Hit changed shape: stay correct, just slower
    new = Hit.__new__
    set_id, set_title = Hit.id.__set__, Hit.title.__set__  # type: ignore[attr-defined]
    set_text, set_score = Hit.text.__set__, Hit.score.__set__  # type: ignore[attr-defined]

    def make(pid: str, title: str, text: str, score: float) -> Hit:
        hit = new(Hit)
        set_id(hit, pid)
        set_title(hit, title)
        set_text(hit, text)
        set_score(hit, score)
        return hit

    return make


new_hit = _fast_hit_factory()


_get_id, _get_title, _get_text = Hit.id.__get__, Hit.title.__get__, Hit.text.__get__  # type: ignore[attr-defined]
_set_id, _set_title, _set_text = Hit.id.__set__, Hit.title.__set__, Hit.text.__set__  # type: ignore[attr-defined]
_set_score = Hit.score.__set__  # type: ignore[attr-defined]


class StoredHit(Hit):
    """A Hit whose id, title and text are read from the passage store when first asked for.

    A search makes ten or more hits per query, and most callers read a few of them (or none:
    recall counts ids of the top k, fusion re-ranks candidates); cutting every string out up
    front cost 1.5-2 µs a hit, as much as the search itself on a corpus of 20k passages. A
    StoredHit costs the object, its row and its score. It is a ``Hit`` in every other way: frozen,
    equal to (and hashed like) the eager Hit with the same fields; ``dataclasses.replace`` gives
    an eager one, copying and pickling a plain ``Hit``. Each store makes its own subclass, whose
    ``_lines`` says where its strings are (one attribute less to set per hit)."""

    __slots__ = ("_row",)  # the passage's row until its strings are read, then -1
    _lines: ClassVar[PassageLines | None] = None

    def __init__(self, id: str, title: str, text: str, score: float):  # what replace() calls: eager
        _set_id(self, id)
        _set_title(self, title)
        _set_text(self, text)
        _set_score(self, score)
        _set_row(self, -1)

    def _read(self) -> None:
        pid, title, text = self._lines.strings(_get_row(self))  # type: ignore[union-attr]
        _set_id(self, pid)
        _set_title(self, title)
        _set_text(self, text)
        _set_row(self, -1)

    @property  # type: ignore[override]
    def id(self) -> str:
        if _get_row(self) >= 0:
            self._read()
        return _get_id(self)

    @property  # type: ignore[override]
    def title(self) -> str:
        if _get_row(self) >= 0:
            self._read()
        return _get_title(self)

    @property  # type: ignore[override]
    def text(self) -> str:
        if _get_row(self) >= 0:
            self._read()
        return _get_text(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Hit):
            return NotImplemented
        return (self.id, self.title, self.text, self.score) == (other.id, other.title, other.text, other.score)

    __hash__ = Hit.__hash__

    def __reduce__(self) -> tuple[type, tuple[str, str, str, float]]:
        return Hit, (self.id, self.title, self.text, self.score)


_get_row, _set_row = StoredHit._row.__get__, StoredHit._row.__set__  # type: ignore[attr-defined]
_consume = deque(maxlen=0).extend  # runs a map for its side effects at C speed


def stored_hit_class(lines: PassageLines) -> type[StoredHit]:
    """The StoredHit subclass of one store."""
    return type("StoredHit", (StoredHit,), {"__slots__": (), "_lines": lines, "__module__": __name__})


def stored_hits(cls: type[StoredHit], rows: list[int], scores: list[float]) -> list[Hit]:
    """Hits of class ``cls`` for ``rows`` with their ``scores``, made in bulk: each loop runs in C."""
    out: list[Hit] = list(map(Hit.__new__, repeat(cls, len(rows))))
    _consume(map(_set_row, out, rows))
    _consume(map(_set_score, out, scores))
    return out
