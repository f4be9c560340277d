"""Method names, their option models, and how to build one from a model, a retriever and options.

``METHODS`` is a ``dynrag.registry.Registry`` like every other named choice: an entry's opener is
the method class (called as ``cls(lm, builder, options, retriever=...)``), its options the class's
``Options`` model, its summary the first line of the class's docstring. Adding a method: its module
and one name in the tuple below.
"""

from __future__ import annotations

import sys
from typing import Any, Mapping

from dynrag.errors import ConfigError
from dynrag.lm.base import LanguageModel
from dynrag.methods.base import Method, MethodOptions, MethodTraits
from dynrag.methods.deeprag import DeepRag
from dynrag.methods.direct import Direct
from dynrag.methods.dragin import Dragin
from dynrag.methods.etc import Etc
from dynrag.methods.fixed import FixedLength, FixedSentence
from dynrag.methods.flare import Flare
from dynrag.methods.ircot import Ircot
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.seakr import Seakr
from dynrag.methods.single import Single
from dynrag.registry import Registry, parse_pairs
from dynrag.retrieval.base import Retriever

METHODS: Registry[Method] = Registry("method")
for _cls in (Direct, Single, FixedLength, FixedSentence, Flare, Dragin, DeepRag, Ircot, Etc, Seakr):
    _doc = _cls.__doc__ or sys.modules[_cls.__module__].__doc__ or ""
    METHODS.add(_cls.name, _cls, _cls.Options, " ".join(_doc.strip().split("\n\n")[0].split()),  # first paragraph
                traits=_cls.traits)


def method_traits(name: str) -> MethodTraits:
    """What method ``name`` needs (unknown names list the choices)."""
    return METHODS.get(name).traits or MethodTraits()


def method_names() -> list[str]:
    return METHODS.names()


def method_class(name: str) -> type:
    return METHODS.get(name).opener  # type: ignore[return-value]


def parse_options(name: str, values: Mapping[str, Any]) -> MethodOptions:
    """Validate option values for a method; unknown or bad keys name the key and the valid ones."""
    return METHODS.parse_options(name, values)  # type: ignore[return-value]


def parse_option_pairs(pairs: list[str], preset: str | None = None) -> dict[str, str]:
    """`KEY=VALUE` strings from the command line into a dict (values validated later by pydantic);
    ``preset`` is the `--preset NAME` flag, the same as `--option preset=NAME` (which wins)."""
    values = parse_pairs(pairs)
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
    if retriever is None and method_traits(name).needs_retrieval:
        raise ConfigError(f"method {name!r} retrieves, so it needs an index (--corpus DIR)")
    return cls(lm, builder or PromptBuilder.for_dataset("default"), options, retriever=retriever)
