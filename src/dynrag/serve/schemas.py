"""Request models and the OpenAI response, chunk and error shapes the server returns."""

from __future__ import annotations

import time
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from dynrag.errors import unencodable

# The key under which chat completions (and the last stream chunk) carry dynrag's trace.
TRACE_KEY = "dynrag"

# Chat-completion fields OpenAI clients may send that a dynrag method has no use for: accepted and
# ignored (decoding is greedy; the method decides the prompt). Any other unknown field is an error.
IGNORED_CHAT_FIELDS = frozenset({
    "temperature", "top_p", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs",
    "top_logprobs", "user", "seed", "stop", "stream_options", "response_format", "tools", "tool_choice",
    "parallel_tool_calls", "metadata", "store", "service_tier", "modalities", "reasoning_effort",
    "prediction", "audio", "verbosity", "safety_identifier", "prompt_cache_key", "web_search_options",
    "functions", "function_call",
})


class APIError(Exception):
    """An error answered in OpenAI's shape: {"error": {"message", "type", "param", "code"}}."""

    def __init__(self, status: int, message: str, type: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type, code, param
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.code, self.param)


def error_body(message: str, type: str = "invalid_request_error", code: str | None = None,
               param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


class _Request(BaseModel):
    """A request body whose text can all be encoded as UTF-8. JSON lets a client send a lone
    surrogate as an escape ("\\udcff"); such text would fail deep inside the tokenizer or the
    response encoder, so it is refused here, as a 400 naming the field, before anything runs."""

    @field_validator("*", mode="after")
    @classmethod
    def _encodable(cls, value: Any) -> Any:
        _refuse_unencodable(value)  # nested request models check their own fields
        return value

    @model_validator(mode="after")
    def _encodable_extras(self) -> "_Request":
        _refuse_unencodable(self.model_extra or {})
        return self


def _refuse_unencodable(value: Any) -> None:
    problem = unencodable(value)
    if problem is not None:
        raise PydanticCustomError("unencodable_text", "{problem}", {"problem": problem})


class AskRequest(_Request):
    """POST /v1/ask: one question, a method and its options; answered with the full trace."""

    model_config = ConfigDict(extra="forbid")

    question: str
    method: str | None = None  # None: the server's default (--config's method, else single)
    options: dict[str, Any] = Field(default_factory=dict)


class ChatMessage(_Request):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(str(part.get("text", "")) for part in self.content if part.get("type") == "text")
        return self.content or ""


class ChatRequest(_Request):
    """POST /v1/chat/completions: `model` names the method; method options go in `options`
    (the OpenAI client's `extra_body={"options": {...}}`) or as top-level keys."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    n: int = Field(1, ge=1, le=1)
    options: dict[str, Any] = Field(default_factory=dict)

    def question(self) -> str:
        for message in reversed(self.messages):
            if message.role == "user":
                return message.text()
        raise APIError(400, "the messages hold no user message: its content is the question", param="messages")


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def usage(trace: dict[str, Any], prompt_tokens: int) -> dict[str, int]:
    completion = int(trace.get("generated_tokens") or 0)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion, "total_tokens": prompt_tokens + completion}


def chat_completion(completion_id: str, method: str, trace: dict[str, Any], prompt_tokens: int) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": method,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": trace["answer"]},
            "finish_reason": "stop",
            "logprobs": None,
        }],
        "usage": usage(trace, prompt_tokens),
        TRACE_KEY: trace,
    }


def chat_chunk(completion_id: str, method: str, created: int, delta: dict[str, Any],
               finish_reason: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": method,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
        **extra,
    }
