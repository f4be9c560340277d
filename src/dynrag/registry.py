"""The one registry shape (floor 0): name -> opener + typed options + a line of help.

Methods, retrievers, datasets, rerankers and compressors each keep one ``Registry``. An entry's
options are a pydantic model with unknown keys forbidden; ``parse_options`` turns user values
(from ``--option KEY=VALUE``, a config file or an HTTP request) into that model, and every error
names the key, the entry and the valid choices, so help text and messages come from one place.

Openers import their heavy modules themselves, so listing a registry (CLI help) stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from dynrag.errors import ConfigError, plain_error

T = TypeVar("T")
O = TypeVar("O", bound="Options")


class Options(BaseModel):
    """Base of every typed option set: unknown keys are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


@dataclass(frozen=True)
class Entry(Generic[T]):
    """One named choice. ``traits`` is what callers may ask about the choice without opening it
    (a method's ``MethodTraits``, a retriever's ``RetrieverTraits``): each registry's kind has its
    own frozen record, so no caller has to test a name."""

    name: str
    opener: Callable[..., T]
    options: type[Options]
    summary: str = ""
    traits: Any = None

    def option_names(self) -> list[str]:
        return sorted(self.options.model_fields)


def validation_message(exc: ValidationError, where: str) -> str:
    """One line from a pydantic error: the key path, what is wrong, the value given."""
    err = exc.errors()[0]
    key = ".".join(str(p) for p in err["loc"])
    if not key:  # a check across several options: its message names them
        return f"{where}: {plain_error(err)}"
    return f"{where}: option {key!r}: {plain_error(err)}"


def parse_model(model: type[O], values: Mapping[str, Any], where: str) -> O:
    """``model(**values)`` with errors that name ``where``, the bad key and the valid keys."""
    valid = sorted(model.model_fields)
    unknown = sorted(set(values) - set(valid))
    if unknown:
        raise ConfigError(
            f"{where}: unknown option {', '.join(map(repr, unknown))}; valid options: {', '.join(valid) or 'none'}"
        )
    try:
        return model(**values)
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, where)) from exc


class Registry(Generic[T]):
    """Named entries of one kind (``kind`` is used in messages: "method", "retriever", ...)."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Entry[T]] = {}

    def add(
        self, name: str, opener: Callable[..., T], options: type[Options] = Options, summary: str = "",
        traits: Any = None,
    ) -> Entry[T]:
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        entry = Entry(name, opener, options, summary, traits)
        self._entries[name] = entry
        return entry

    def register(
        self, name: str, options: type[Options] = Options, summary: str = "", traits: Any = None
    ) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator form of ``add`` for an opener function."""

        def decorate(opener: Callable[..., T]) -> Callable[..., T]:
            self.add(name, opener, options, summary, traits)
            return opener

        return decorate

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self):
        return iter(self._entries.values())

    def names(self) -> list[str]:
        return list(self._entries)

    def choices(self, sep: str = " | ") -> str:
        """"a | b | c": for help text."""
        return sep.join(self._entries)

    def get(self, name: str) -> Entry[T]:
        try:
            return self._entries[name]
        except KeyError:
            raise ConfigError(f"unknown {self.kind} {name!r}; choose one of: {', '.join(self._entries)}") from None

    def parse_options(self, name: str, values: Mapping[str, Any] | None = None, *, flag: str | None = None) -> Options:
        """``values`` validated into the entry's options; errors name ``flag`` (the command-line
        flag or config key they came from) when given, the entry, the key and the valid keys."""
        entry = self.get(name)
        where = f"{self.kind} {name!r}" if flag is None else f"{flag}: {self.kind} {name!r}"
        return parse_model(entry.options, dict(values or {}), where)

    def open(self, name: str, options: Mapping[str, Any] | Options | None = None, *args: Any, **kwargs: Any) -> T:
        """Validate ``options`` (unless already the entry's model) and call the opener."""
        entry = self.get(name)
        if not isinstance(options, entry.options):
            options = self.parse_options(name, options if isinstance(options, Mapping) else None)
        return entry.opener(options, *args, **kwargs)

    def help_lines(self) -> list[str]:
        return [f"{e.name}: {e.summary}" if e.summary else e.name for e in self]


def parse_pairs(pairs: Iterable[str], flag: str = "--option") -> dict[str, str]:
    """``["KEY=VALUE", ...]`` from the command line into a dict (values typed later by pydantic).

    A value may itself hold ``=``; keys have ``-`` turned into ``_`` (``--option max-steps=4``).
    """
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ConfigError(f"{flag} {pair!r}: expected KEY=VALUE")
        out[key] = value.strip()
    return out


def split_csv_pairs(values: Sequence[str]) -> list[str]:
    """``["a=1,b=2", "c=3"]`` -> ``["a=1", "b=2", "c=3"]``: several pairs in one flag. A comma
    splits only where a ``KEY=`` follows it, so a value may hold commas (``ks=3,10,x=1`` ->
    ``["ks=3,10", "x=1"]``)."""
    import re

    out: list[str] = []
    for value in values:
        out.extend(part for part in (p.strip() for p in re.split(r",(?=\s*[A-Za-z_][\w-]*=)", value)) if part)
    return out
