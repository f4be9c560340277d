"""Method names, their option models, and how to build one from a model, a retriever and options."""

from __future__ import annotations

from typing import Any, Mapping

from pydantic import ValidationError

from dynrag.errors import ConfigError
from dynrag.lm.base import LanguageModel
from dynrag.methods.base import Method, MethodOptions
from dynrag.methods.deeprag import DeepRag
from dynrag.methods.direct import Direct
from dynrag.methods.dragin import Dragin
from dynrag.methods.fixed import FixedLength, FixedSentence
from dynrag.methods.flare import Flare
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.single import Single
from dynrag.retrieval.base import Retriever

METHODS: dict[str, type] = {
    cls.name: cls for cls in (Direct, Single, FixedLength, FixedSentence, Flare, Dragin, DeepRag)
}

# Methods that never search; every other method needs a retriever.
NO_RETRIEVAL = {"direct"}


def method_names() -> list[str]:
    return list(METHODS)


def method_class(name: str) -> type:
    if name not in METHODS:
        raise ConfigError(f"unknown method {name!r}; choose one of: {', '.join(METHODS)}")
    return METHODS[name]


def parse_options(name: str, values: Mapping[str, Any]) -> MethodOptions:
    """Validate option values for a method; unknown or bad keys name the key and the valid ones."""
    options_cls: type[MethodOptions] = method_class(name).Options
    valid = sorted(options_cls.model_fields)
    unknown = sorted(set(values) - set(valid))
    if unknown:
        raise ConfigError(
            f"unknown option {', '.join(map(repr, unknown))} for method {name!r}; valid options: {', '.join(valid)}"
        )
    try:
        return options_cls(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"option {key!r} of method {name!r}: {err['msg']} (got {err.get('input')!r})") from exc


def parse_option_pairs(pairs: list[str], preset: str | None = None) -> dict[str, str]:
    """`KEY=VALUE` strings from the command line into a dict (values validated later by pydantic);
    ``preset`` is the `--preset NAME` flag, the same as `--option preset=NAME` (which wins)."""
    values: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--option {pair!r} is not KEY=VALUE")
        values[key.strip()] = value.strip()
    if preset is not None:
        values.setdefault("preset", preset)
    return values


def build_method(
    name: str,
    lm: LanguageModel,
    retriever: Retriever | None,
    options: MethodOptions | Mapping[str, Any] | None = None,
    builder: PromptBuilder | None = None,
) -> Method:
    cls = method_class(name)
    if not isinstance(options, MethodOptions):
        options = parse_options(name, options or {})
    if retriever is None and name not in NO_RETRIEVAL:
        raise ConfigError(f"method {name!r} retrieves, so it needs an index (--index DIR)")
    return cls(lm, builder or PromptBuilder.for_dataset("default"), options, retriever=retriever)
