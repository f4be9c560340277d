"""Server settings and the ASGI guard in front of every route: request ids, bearer key, body size.

The guard is plain ASGI (not a BaseHTTPMiddleware) so streamed responses and disconnect detection
pass through untouched. It reads a request body only up to the limit, then hands the app a replay
of it; a larger body is answered 413 without reading the rest.
"""

from __future__ import annotations

import hmac
import json
import uuid
from typing import Any

from pydantic import Field

from dynrag.registry import Options
from dynrag.serve.schemas import error_body

DEFAULT_PORT = 8000


class ServeSettings(Options):
    host: str = Field("127.0.0.1", description="address to bind; loopback unless told otherwise")
    port: int = Field(DEFAULT_PORT, ge=0, le=65535, description="TCP port (0: any free one)")
    api_key: str | None = Field(None, description="bearer key every /v1/* request must carry (None: open)")
    queue_size: int = Field(8, ge=0, description="requests that may wait while the running ones run; beyond: 429")
    batch: int | None = Field(None, ge=1, description="requests run at once, their generations decoded together "
                              "(None: 8 for a local model that can batch, else 1)")
    timeout: float = Field(300.0, gt=0, description="seconds a request may wait and run before it is cancelled")
    max_body_bytes: int = Field(65536, ge=256, description="largest request body")
    max_question_chars: int = Field(2000, ge=1, description="longest question")
    max_tokens: int = Field(512, ge=1, description="ceiling on max_tokens / max_new_tokens per request")


async def send_json(send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] = ()) -> None:
    data = json.dumps(body).encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), *headers],
    })
    await send({"type": "http.response.body", "body": data})


class Guard:
    """Request ids, the bearer key on /v1/*, and the body-size limit."""

    def __init__(self, app, settings: ServeSettings):
        self.app, self.settings = app, settings

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        request_id = (headers.get("x-request-id") or uuid.uuid4().hex)[:128]
        id_header = (b"x-request-id", request_id.encode("latin-1", "replace"))

        async def send_with_id(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), id_header]}
            await send(message)

        key = self.settings.api_key
        if key and scope["path"].startswith("/v1/") and not _authorized(headers.get("authorization", ""), key):
            given = "no" if "authorization" not in headers else "a wrong"
            return await send_json(send_with_id, 401, error_body(
                f"{given} API key: send the header 'Authorization: Bearer <key>' (the server's --api-key "
                "or DYNRAG_API_KEY)", "invalid_request_error", code="invalid_api_key"),
                [(b"www-authenticate", b"Bearer")])
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send_with_id)

        limit = self.settings.max_body_bytes
        too_large = error_body(f"the request body is larger than this server's limit of {limit} bytes",
                               "invalid_request_error", code="request_too_large")
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            return await send_json(send_with_id, 413, too_large, [(b"connection", b"close")])
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > limit:
                return await send_json(send_with_id, 413, too_large, [(b"connection", b"close")])
            if not message.get("more_body"):
                break
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()  # later calls wait for the disconnect, as usual

        return await self.app(scope, replay, send_with_id)


def _authorized(header: str, key: str) -> bool:
    scheme, _, token = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), key.encode())
