"""What `dynrag tune` searches: ``--space NAME=SPEC`` parsed into typed parameters (pure).

A spec is a range ``LO:HI`` (``LO:HI:log`` on a log scale, ``LO:HI:STEP`` in steps), or a list
``A,B,C`` (one value is a list of one). Each name is an option of the method, or of the retriever
when the method has no option of that name (the hybrid retriever's ``alpha``); a range needs a
numeric option. Every value a parameter can take at its ends is checked against the option's
model now, so a bad bound fails before a trial runs.
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from dynrag.errors import ConfigError, plain_error
from dynrag.registry import Options

Section = Literal["options", "retriever_options"]
FLAG = "--space"


@dataclass(frozen=True)
class Param:
    """One searched option. ``kind``: "float" or "int" (a range) or "list" (``choices``)."""

    name: str
    section: Section
    kind: Literal["float", "int", "list"]
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] = ()
    spec: str = ""  # as given, NAME=SPEC

    def grid(self) -> list[Any] | None:
        """Every value, when the parameter has finitely many (a list, or a range with a step)."""
        if self.kind == "list":
            return list(self.choices)
        if self.step is None:
            return None
        assert self.low is not None and self.high is not None
        count = int(math.floor((self.high - self.low) / self.step + 1e-9)) + 1
        values = [self.low + i * self.step for i in range(count)]
        return [int(v) for v in values] if self.kind == "int" else [round(v, 10) for v in values]

    def describe(self) -> str:
        """The canonical text of the parameter: what a study records of its space."""
        where = "" if self.section == "options" else "retriever."
        if self.kind == "list":
            return f"{where}{self.name}=" + ",".join(_text(c) for c in self.choices)
        tail = ":log" if self.log else (f":{_text(self.step)}" if self.step is not None else "")
        return f"{where}{self.name}={_text(self.low)}:{_text(self.high)}{tail}"


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value)) if abs(value) < 1e15 else repr(value)
    return str(value)


def numeric_kind(annotation: Any) -> Literal["float", "int"] | None:
    """"float" or "int" when an option's type is a number (optionally None), else None."""
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union else (annotation,)
    kinds = {a for a in args if a is not type(None)}
    if kinds == {float} or kinds == {int, float}:
        return "float"
    if kinds == {int}:
        return "int"
    return None


def _number(text: str, spec: str, name: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{FLAG} {spec}: {what} {text!r} is not a number ({name} is a numeric option)") from None
    if not math.isfinite(value):
        raise ConfigError(f"{FLAG} {spec}: {what} {text!r} is not a finite number")
    return value


def parse_param(spec: str, method_options: type[Options], retriever_options: type[Options] | None,
                method: str, retriever: str | None) -> Param:
    """``NAME=SPEC`` as a Param of the method's options, or the retriever's (``retriever.NAME``
    names the retriever's explicitly); every error is one line naming the spec."""
    name, sep, body = spec.partition("=")
    name, body = name.strip().replace("-", "_"), body.strip()
    if not sep or not name or not body:
        raise ConfigError(f"{FLAG} {spec!r}: expected NAME=LO:HI, NAME=LO:HI:log, NAME=LO:HI:STEP or NAME=A,B,C")
    section, model = _section(name, spec, method_options, retriever_options, method, retriever)
    name = name.removeprefix("retriever.")
    kind = numeric_kind(model.model_fields[name].annotation)
    if ":" in body:
        if kind is None:
            raise ConfigError(f"{FLAG} {spec}: {name} is not a numeric option; give its values as a list A,B,C")
        param = _range(spec, name, section, kind, body.split(":"))
    else:
        values = [v.strip() for v in body.split(",")]
        if any(not v for v in values):
            raise ConfigError(f"{FLAG} {spec}: an empty value in the list")
        if kind is not None:
            numbers = [_number(v, spec, name, "value") for v in values]
            values = [int(n) if kind == "int" and n.is_integer() else n for n in numbers]
        param = Param(name, section, "list", choices=tuple(dict.fromkeys(values)), spec=spec)
    for value in _ends(param):
        _check_value(model, name, value, spec)
    return param


def _section(name: str, spec: str, method_options: type[Options], retriever_options: type[Options] | None,
             method: str, retriever: str | None) -> tuple[Section, type[Options]]:
    if not name.startswith("retriever.") and name in method_options.model_fields:
        return "options", method_options
    bare = name.removeprefix("retriever.")
    if retriever_options is not None and bare in retriever_options.model_fields:
        return "retriever_options", retriever_options
    valid = sorted(method_options.model_fields)
    extra = sorted(retriever_options.model_fields) if retriever_options is not None else []
    theirs = f"; retriever {retriever!r}: {', '.join(extra)}" if extra else ""
    raise ConfigError(f"{FLAG} {spec}: unknown option {bare!r} of method {method!r}; valid options: "
                      f"{', '.join(valid)}{theirs}")


def _range(spec: str, name: str, section: Section, kind: Literal["float", "int"], parts: list[str]) -> Param:
    if len(parts) not in (2, 3):
        raise ConfigError(f"{FLAG} {spec}: a range is LO:HI, LO:HI:log or LO:HI:STEP")
    low, high = (_number(p.strip(), spec, name, w) for p, w in zip(parts[:2], ("low end", "high end")))
    if low >= high:
        raise ConfigError(f"{FLAG} {spec}: the range is {'empty' if low == high else 'inverted'} "
                          f"(low end {_text(low)} must be below high end {_text(high)})")
    log, step = False, None
    if len(parts) == 3:
        tail = parts[2].strip()
        if tail == "log":
            if low <= 0:
                raise ConfigError(f"{FLAG} {spec}: a log range needs a low end above 0")
            log = True
        else:
            step = _number(tail, spec, name, "step")
            if step <= 0 or step > high - low:
                raise ConfigError(f"{FLAG} {spec}: the step must be above 0 and at most HI - LO")
    if kind == "int":
        if not (low.is_integer() and high.is_integer() and (step is None or step.is_integer())):
            raise ConfigError(f"{FLAG} {spec}: {name} is a whole number; give whole-number ends and step")
        return Param(name, section, "int", int(low), int(high), log, int(step) if step else None, spec=spec)
    return Param(name, section, "float", low, high, log, step, spec=spec)


def _ends(param: Param) -> list[Any]:
    if param.kind == "list":
        return list(param.choices)
    grid = param.grid()
    return [param.low, grid[-1] if grid else param.high]


def _check_value(model: type[Options], name: str, value: Any, spec: str) -> None:
    try:
        model.model_validate({name: value})
    except ValidationError as exc:
        errors = [e for e in exc.errors() if tuple(e["loc"][:1]) == (name,)]
        if errors:
            raise ConfigError(f"{FLAG} {spec}: {name} {plain_error({**errors[0], 'input': _text(value)})}") from None
        # another option's check across options: the full trial configuration decides


def check_names(params: list[Param]) -> None:
    seen: set[tuple[str, str]] = set()
    for p in params:
        if (p.section, p.name) in seen:
            raise ConfigError(f"{FLAG} {p.spec}: {p.name} is given twice")
        seen.add((p.section, p.name))


def grid_space(params: list[Param]) -> dict[str, list[Any]]:
    """The grid sampler's space, keyed by parameter key; a range without a step has no grid."""
    space = {}
    for p in params:
        values = p.grid()
        if values is None:
            raise ConfigError(f"{FLAG} {p.spec}: --sampler grid needs a list A,B,C or a range with a step LO:HI:STEP")
        space[key(p)] = values
    return space


def key(param: Param) -> str:
    """The trial parameter's name in the study: the option's name, ``retriever.NAME`` for the retriever's."""
    return param.name if param.section == "options" else f"retriever.{param.name}"
