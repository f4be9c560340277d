"""The FastAPI app: OpenAI-compatible chat completions, /v1/ask, /v1/models, /health, the viewer.

Every error is answered in OpenAI's error shape. Work for the model goes through the ModelQueue
(``batch`` requests at a time, their generations decoded together when it is over 1; a bounded
queue; 429 beyond it); a request past its timeout (504) or whose client
hangs up is cancelled at the next generated token.

Streaming: dynamic methods may throw generated text away (DRAGIN cuts its answer where retrieval
fires), so the answer is only final when the method is done. A stream therefore sends the role
chunk at once, SSE comments while the method works (which also notice a client that has gone),
then the answer's words as content chunks, a last chunk with finish_reason "stop" and the trace
under "dynrag", and `data: [DONE]`.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from contextlib import asynccontextmanager
from importlib.resources import files
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from dynrag.errors import DynragError, plain_error
from dynrag.serve.cancel import Cancelled
from dynrag.serve.engine import Engine
from dynrag.serve.limits import Guard, ServeSettings
from dynrag.serve.queue import Disconnected, ModelQueue, QueueFull, TimedOut, watch
from dynrag.serve.schemas import (
    IGNORED_CHAT_FIELDS,
    TRACE_KEY,
    APIError,
    AskRequest,
    ChatRequest,
    chat_chunk,
    chat_completion,
    new_id,
)

STATIC = files("dynrag.serve") / "static"
KEEPALIVE_SECONDS = 1.0


def create_app(engine: Engine, settings: ServeSettings) -> FastAPI:
    queue = ModelQueue(engine.lm, settings.queue_size, workers=settings.batch or 1)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        queue.cancel_all()  # a shutdown stops the running method at its next token

    app = FastAPI(title="dynrag", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.engine, app.state.queue, app.state.settings = engine, queue, settings
    _add_error_handlers(app)
    _add_pages(app, engine, settings, queue)
    _add_answering(app, engine, settings, queue)
    return Guard(app, settings)


def _add_error_handlers(app: FastAPI) -> None:
    """Every error in OpenAI's error shape: ours, request validation's, and routing's."""

    @app.exception_handler(APIError)
    async def api_error(_: Request, exc: APIError):
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError):
        err = exc.errors()[0]
        loc = [str(p) for p in err.get("loc", ()) if p != "body"]
        message = f"{'.'.join(loc) or 'body'}: {plain_error(err)}"
        if err.get("type") == "extra_forbidden":
            message += f"; valid fields: {', '.join(AskRequest.model_fields)}"
        return JSONResponse(APIError(400, message, code="invalid_request", param=".".join(loc) or None).body(), 400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        return JSONResponse(APIError(exc.status_code, str(exc.detail), code=code).body(), exc.status_code)


def _add_pages(app: FastAPI, engine: Engine, settings: ServeSettings, queue: ModelQueue) -> None:
    """The routes that do not run the model: the viewer, /health and /v1/models."""

    @app.get("/", include_in_schema=False)
    async def viewer():
        return FileResponse(str(STATIC / "index.html"), media_type="text/html")

    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")

    @app.get("/health")
    async def health():
        return {"status": "ok", "model": engine.model_name, "index": engine.index_label,
                "methods": engine.method_names(), "auth": bool(settings.api_key), "queue": queue.status(),
                "limits": {k: getattr(settings, k) for k in ("timeout", "max_body_bytes", "max_question_chars",
                                                             "max_tokens", "queue_size")}}

    @app.get("/v1/models")
    async def models():
        created = int(time.time())
        return {"object": "list", "data": [
            {"object": "model", "created": created, "owned_by": "dynrag", "model": engine.model_name, **m}
            for m in engine.describe_methods()
        ]}


def _add_answering(app: FastAPI, engine: Engine, settings: ServeSettings, queue: ModelQueue) -> None:
    """/v1/ask and /v1/chat/completions: validate, queue for the model, wait for the answer."""

    def validated(method: str, options: dict, question: str, max_tokens: int | None):
        try:
            return engine.validate(method, options, question, max_tokens=max_tokens, ceiling=settings.max_tokens,
                                   max_question_chars=settings.max_question_chars)
        except DynragError as exc:
            raise APIError(400, str(exc), code="unsupported_method", param="model") from None

    def admit(name, options, question):
        try:
            return queue.submit(lambda: (engine.answer(name, options, question), engine.prompt_tokens(question)))
        except QueueFull as exc:
            raise APIError(429, f"{exc}; retry after {exc.retry_after} s", type="rate_limit_error",
                           code="queue_full", headers={"Retry-After": str(exc.retry_after)}) from None

    async def result_of(job, request: Request, deadline: float):
        try:
            return await queue.wait_for(job, deadline, request.is_disconnected)
        except TimedOut:
            raise APIError(504, f"no answer within this server's timeout of {settings.timeout:g} s; the work "
                                "was cancelled", type="timeout_error", code="timeout") from None
        except Disconnected:
            raise APIError(499, "the client disconnected; the work was cancelled", code="client_closed") from None
        except Cancelled:
            raise APIError(503, "the work was cancelled (the server is shutting down)", type="server_error",
                           code="cancelled") from None
        except DynragError as exc:
            raise APIError(400, str(exc), code="invalid_request") from None
        except Exception as exc:  # a bug, not the user's input: say so in OpenAI's shape
            raise APIError(500, f"{type(exc).__name__}: {exc}", type="server_error", code="internal_error") from None

    @app.post("/v1/ask")
    async def ask(body: AskRequest, request: Request):
        deadline = time.monotonic() + settings.timeout
        name, options, question = validated(body.method, body.options, body.question, None)
        trace, _ = await result_of(admit(name, options, question), request, deadline)
        return trace

    @app.post("/v1/chat/completions")
    async def chat(body: ChatRequest, request: Request):
        deadline = time.monotonic() + settings.timeout
        options = _chat_options(engine, body)
        name, parsed, question = validated(body.model, options, body.question(),
                                           body.max_completion_tokens or body.max_tokens)
        job = admit(name, parsed, question)
        completion_id = new_id("chatcmpl")
        if not body.stream:
            trace, prompt_tokens = await result_of(job, request, deadline)
            return chat_completion(completion_id, name, trace, prompt_tokens)
        return StreamingResponse(_stream(job, queue, request, deadline, completion_id, name, settings),
                                 media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


def _chat_options(engine: Engine, body: ChatRequest) -> dict[str, Any]:
    """The method options of a chat request: its ``options``, plus the top-level fields that name
    an option of its method; OpenAI fields no method uses are dropped, any other field is an error."""
    options = dict(body.options)
    valid_options = _option_names(engine, body.model)
    for key, value in (body.model_extra or {}).items():
        if key in IGNORED_CHAT_FIELDS:
            continue
        if valid_options is not None and key in valid_options:
            options.setdefault(key, value)
            continue
        raise APIError(400, f"unknown field {key!r}; method options go in 'options' (valid for "
                            f"{body.model!r}: {', '.join(sorted(valid_options or [])) or 'none'})",
                       code="unknown_option", param=key)
    return options


def _option_names(engine: Engine, method: str) -> set[str] | None:
    from dynrag.methods.registry import method_class

    try:
        return set(method_class(method).Options.model_fields)
    except DynragError:
        return None  # the unknown method is reported by validation


def _sse(data: Any) -> bytes:
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode()


async def _stream(job, queue: ModelQueue, request: Request, deadline: float, completion_id: str, method: str,
                  settings: ServeSettings):
    created = int(time.time())
    answered = False  # True once the stream has said how the request ended
    try:
        yield _sse(chat_chunk(completion_id, method, created, {"role": "assistant", "content": ""}))
        future = watch(job)
        while not future.done():
            if time.monotonic() > deadline:
                job.cancel.set()
                queue.count("timed_out")
                answered = True
                yield _sse(APIError(504, f"no answer within this server's timeout of {settings.timeout:g} s; the "
                                         "work was cancelled", type="timeout_error", code="timeout").body())
                yield _sse("[DONE]")
                return
            await asyncio.wait({future}, timeout=KEEPALIVE_SECONDS)
            if not future.done():
                yield b": working\n\n"  # a comment: clients skip it; a gone client makes this write fail
        answered = True
        try:
            trace, _ = future.result()
        except Cancelled:
            yield _sse(APIError(503, "the work was cancelled", type="server_error", code="cancelled").body())
            yield _sse("[DONE]")
            return
        except Exception as exc:
            kind = "invalid_request_error" if isinstance(exc, DynragError) else "server_error"
            yield _sse(APIError(400 if kind == "invalid_request_error" else 500, str(exc), type=kind).body())
            yield _sse("[DONE]")
            return
        for word in re.findall(r"\s*\S+", trace["answer"]):
            yield _sse(chat_chunk(completion_id, method, created, {"content": word}))
        yield _sse(chat_chunk(completion_id, method, created, {}, "stop", **{TRACE_KEY: trace}))
        yield _sse("[DONE]")
    finally:
        if not answered and not job.future.done():  # the client went away (the stream was closed): stop the work
            job.cancel.set()
            queue.count("disconnected")
