"""The ASGI layers in front of the endpoints: request metrics, bearer-token authentication and the body
size limit. They are plain ASGI middleware, so they act before FastAPI reads or parses anything: an
unauthenticated or oversized request costs the service no JSON parsing and no model time."""

import hmac
import json
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from elmo.serve.metrics import Metrics

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PROTECTED_PREFIXES = ("/v1/", "/metrics")


def error_payload(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    """The one error shape every 4xx/5xx answer uses: ``{"error": {"code", "message", "field"}}``."""
    return {"error": {"code": code, "message": message, "field": field}}


async def send_json_error(send: Send, status: int, code: str, message: str,
                          headers: Iterable[tuple[str, str]] = ()) -> None:
    body = json.dumps(error_payload(code, message)).encode()
    raw_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw_headers += [(name.encode(), value.encode()) for name, value in headers]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


class RequestMetrics:
    """Counts every answer by endpoint and status and times it, up to the last byte sent."""

    def __init__(self, app: ASGIApp, metrics: Metrics, endpoints: Iterable[str]) -> None:
        self.app = app
        self.metrics = metrics
        self.endpoints = frozenset(endpoints)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        endpoint = scope["path"] if scope["path"] in self.endpoints else "other"  # bounded label values
        started = time.perf_counter()
        status = 500

        async def send_recording(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_recording)
        finally:
            self.metrics.requests.labels(endpoint, str(status)).inc()
            self.metrics.latency.labels(endpoint).observe(time.perf_counter() - started)


class BearerAuth:
    """``Authorization: Bearer <key>`` on /v1/ and /metrics; the page, /healthz and the docs stay open."""

    def __init__(self, app: ASGIApp, api_keys: Iterable[str]) -> None:
        self.app = app
        self.api_keys = [key.encode() for key in api_keys]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.api_keys and scope["path"].startswith(PROTECTED_PREFIXES):
            header = dict(scope["headers"]).get(b"authorization", b"")
            scheme, _, token = header.partition(b" ")
            # compare_digest against every key, so timing tells nothing about which key came close
            matches = [hmac.compare_digest(token.strip(), key) for key in self.api_keys]
            if scheme.lower() != b"bearer" or not any(matches):
                await send_json_error(send, 401, "unauthorized", "missing or wrong bearer token (Authorization header)",
                                      [("www-authenticate", "Bearer")])
                return
        await self.app(scope, receive, send)


class BodySizeLimit:
    """Reads at most ``max_bytes`` of a request body, answering 413 past it, then hands the body on."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        too_large = f"request body exceeds {self.max_bytes} bytes (--max-body-bytes)"
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await send_json_error(send, 413, "body_too_large", too_large)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left before sending its body: nobody to answer
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                await send_json_error(send, 413, "body_too_large", too_large)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def receive_buffered() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, receive_buffered, send)
