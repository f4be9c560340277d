"""One loaded model and index answering questions with any registered method.

Requests are validated here before they are queued (unknown method or option, option values,
the max_tokens ceiling, question length), so a bad request costs no model time. Built methods are
kept by (name, options), since some options load components (a reranker, the query classifier).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any, Mapping

from dynrag.errors import ConfigError
from dynrag.methods.base import MethodOptions
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.registry import build_method, method_class, method_names, method_traits, parse_options
from dynrag.serve.cancel import CancellableLM
from dynrag.serve.schemas import APIError


def _summary(cls: type) -> str:
    import sys

    doc = cls.__doc__ or sys.modules[cls.__module__].__doc__ or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


class Engine:
    def __init__(self, lm: Any, retriever: Any, builder: PromptBuilder, index_label: str, cached_methods: int = 16,
                 default_method: str = "single", default_options: Mapping[str, Any] | None = None):
        self.lm = CancellableLM(lm)
        self.retriever, self.builder, self.index_label = retriever, builder, index_label
        # A request that names no method gets this one, with these options under its own.
        self.default_method, self.default_options = default_method, dict(default_options or {})
        self._methods: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._cached_methods = cached_methods
        self._methods_lock = threading.Lock()  # requests on several worker threads share the cache

    @property
    def model_name(self) -> str:
        return self.lm.name

    def method_names(self) -> list[str]:
        return [n for n in method_names() if not method_traits(n).needs_retrieval or self.retriever is not None]

    def describe_methods(self) -> list[dict[str, Any]]:
        """For GET /v1/models: each method, whether this model can run it, and its options."""
        out = []
        for name in self.method_names():
            cls = method_class(name)
            schema = cls.Options.model_json_schema()
            traits = method_traits(name)
            out.append({
                "id": name,
                "summary": _summary(cls),
                "needs_attention": traits.needs_attention,
                "needs_hidden_states": traits.needs_hidden_states,
                "available": traits.runs_on(self.lm.capabilities),
                "options": {
                    key: {k: v for k, v in prop.items() if k in ("type", "default", "description", "enum", "anyOf",
                                                                "minimum", "maximum", "exclusiveMinimum")}
                    for key, prop in schema.get("properties", {}).items()
                },
            })
        return out

    def validate(self, method: str | None, options: Mapping[str, Any], question: str, *,
                 max_tokens: int | None, ceiling: int, max_question_chars: int) -> tuple[str, MethodOptions, str]:
        names = self.method_names()
        if method is None:
            method, options = self.default_method, {**self.default_options, **options}
        if method not in names:
            raise APIError(404, f"unknown method (model) {method!r}; valid methods: {', '.join(names)}",
                           code="model_not_found", param="model")
        question = (question or "").strip()
        if not question:
            raise APIError(400, "the question is empty", code="empty_question", param="question")
        if len(question) > max_question_chars:
            raise APIError(400, f"the question is {len(question)} characters; this server's limit is "
                                f"{max_question_chars}", code="question_too_long", param="question")
        values = dict(options)
        if max_tokens is not None:
            values["max_new_tokens"] = max_tokens
        try:
            parsed = parse_options(method, values)
        except ConfigError as exc:
            unknown = sorted(set(values) - set(method_class(method).Options.model_fields))
            raise APIError(400, str(exc), code="unknown_option" if unknown else "invalid_option",
                           param=f"options.{unknown[0]}" if unknown else "options") from None
        requested = getattr(parsed, "max_new_tokens", None)
        if requested is not None and requested > ceiling:
            raise APIError(400, f"max_tokens {requested} is above this server's ceiling of {ceiling}",
                           code="max_tokens_too_large", param="max_tokens")
        if not method_traits(method).runs_on(self.lm.capabilities):
            build_method(method, self.lm, self.retriever, parsed, self.builder)  # raises the refusal
        return method, parsed, question

    def method(self, name: str, options: MethodOptions) -> Any:
        key = (name, json.dumps(options.model_dump(), sort_keys=True, default=str))
        with self._methods_lock:
            return self._cached_method(key, name, options)

    def _cached_method(self, key: tuple[str, str], name: str, options: MethodOptions) -> Any:
        if key in self._methods:
            self._methods.move_to_end(key)
            return self._methods[key]
        retriever = self.retriever if method_traits(name).needs_retrieval else None
        built = build_method(name, self.lm, retriever, options, self.builder)
        self._methods[key] = built
        while len(self._methods) > self._cached_methods:
            self._methods.popitem(last=False)
        return built

    def answer(self, name: str, options: MethodOptions, question: str) -> dict[str, Any]:
        """Runs on a model worker thread: the full trace, as `dynrag ask --trace` writes it."""
        return self.method(name, options).answer(question).to_dict()

    def prompt_tokens(self, question: str) -> int:
        try:
            return int(self.lm.count_tokens(question))
        except Exception:  # usage figures are informative; a server without a tokenizer gives 0
            return 0
