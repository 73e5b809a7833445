"""What stands in front of the endpoints: uvicorn's HTTP protocol with header and write timeouts, and the
ASGI layers (request metrics, bearer-token authentication, the body's size and time limits). The ASGI layers
are plain middleware, so they act before FastAPI reads or parses anything: an unauthenticated, oversized or
slow request costs the service no JSON parsing and no model time."""

import asyncio
import hmac
import json
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from elmo.serve.metrics import Metrics

CLIENT_CLOSED = 499  # nginx's status for a client that left before its answer: counted, sent to nobody

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PROTECTED_PREFIXES = ("/v1/", "/metrics")


def error_payload(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    """The one error shape every 4xx/5xx answer uses: ``{"error": {"code", "message", "field"}}``."""
    return {"error": {"code": code, "message": message, "field": field}}


def _error_body(code: str, message: str) -> bytes:
    """Serialized as Starlette's ``JSONResponse`` serializes the app's errors, so every error body reads alike."""
    return json.dumps(error_payload(code, message), ensure_ascii=False, separators=(",", ":")).encode()


async def send_json_error(send: Send, status: int, code: str, message: str,
                          headers: Iterable[tuple[str, str]] = ()) -> None:
    body = _error_body(code, message)
    raw_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw_headers += [(name.encode(), value.encode()) for name, value in headers]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the two timeouts it lacks, so a slow or silent client cannot hold a
    connection (and the memory behind it) for ever:

    - ``header_timeout_s``: from the connection (or the first byte after a keep-alive pause) to the end of a
      request's head. Past it the connection is closed, with a JSON 408 if part of a head had arrived.
    - ``write_timeout_s``: while more of an answer waits than the transport buffers (its high-water mark),
      the client must take some of it within this time, or the connection is aborted and its buffer freed.

    Idle keep-alive connections are uvicorn's (``timeout_keep_alive``); the body's time limit is
    ``BodySizeLimit``'s. ``configured`` makes the subclass that ``uvicorn.run(http=...)`` takes.
    """

    header_timeout_s = 10.0
    write_timeout_s = 30.0

    @classmethod
    def configured(cls, header_timeout_s: float, write_timeout_s: float) -> type["GuardedH11Protocol"]:
        return type(cls.__name__, (cls,), {"header_timeout_s": header_timeout_s, "write_timeout_s": write_timeout_s})

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._head_timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        self._watch_head()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch_head()

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._head_timer, self._write_timer):
            if timer is not None:
                timer.cancel()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.write_timeout_s, self._write_timed_out)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _watch_head(self) -> None:
        """Run the head timer while a request's head is awaited and some of it (or nothing yet) has come."""
        awaiting_head = self.conn.their_state is h11.IDLE and not self.transport.is_closing()
        if awaiting_head and self.timeout_keep_alive_task is None and self._head_timer is None:
            self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_timed_out)
        elif not awaiting_head and self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.conn.their_state is not h11.IDLE or self.transport.is_closing():
            return
        if self.conn.trailing_data[0]:  # part of a head came: say why the connection ends
            body = _error_body("header_timeout", f"the request head did not arrive within "
                                                 f"{self.header_timeout_s:g} s (--header-timeout)")
            self.transport.write(b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                                 b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
        self.transport.close()

    def _write_timed_out(self) -> None:
        self._write_timer = None
        self.logger.info("a client took none of its answer for %g s (--write-timeout); connection aborted",
                         self.write_timeout_s)
        self.transport.abort()


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
        status: int | None = None

        async def send_recording(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_recording)
        except BaseException:
            status = status or 500
            raise
        finally:
            # no answer and no error: the client left before one (while sending its body), as 499 counts it
            status = status or CLIENT_CLOSED
            self.metrics.requests.labels(endpoint, str(status)).inc()
            self.metrics.latency.labels(endpoint).observe(time.perf_counter() - started)


class BearerAuth:
    """``Authorization: Bearer <key>`` on /v1/ and /metrics; the page, /healthz and the docs stay open.

    A refused request's body is never read, so its 401 closes the connection: otherwise a keyless client could
    trickle that body for ever, past ``--body-timeout`` (which ``BodySizeLimit``, inside this layer, keeps),
    holding one of ``--limit-concurrency``'s connections."""

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
                                      [("www-authenticate", "Bearer"), ("connection", "close")])
                return
        await self.app(scope, receive, send)


class BodySizeLimit:
    """Reads the whole body of any request that declares one (a GET's too: otherwise a body trickled after a GET
    would hold its connection past every timeout) before the app sees it: at most ``max_bytes`` (413 past it),
    all of it within ``timeout_s`` of the request head (408 past it, and the connection closed).

    An oversized body of at most ``drain_bytes`` is read and dropped before the 413 is sent, because clients
    that send the whole body before reading (urllib, requests) would otherwise meet a reset connection
    instead of the answer; a client that sent ``Expect: 100-continue`` is answered before sending it.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float = 30.0, drain_bytes: int = 16 << 20) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.drain_bytes = drain_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _declares_body(scope):
            await self.app(scope, receive, send)
            return
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        read = _BodyRead()
        try:
            async with asyncio.timeout_at(deadline):
                await self._read(scope, receive, read)
        except TimeoutError:
            await send_json_error(send, 408, "body_timeout", f"the request body did not arrive within "
                                  f"{self.timeout_s:g} s (--body-timeout)", [("connection", "close")])
            return
        if read.gone:
            return  # nobody to answer
        if read.too_large:
            await self._drain(scope, receive, read, deadline)
            await send_json_error(send, 413, "body_too_large", f"request body exceeds {self.max_bytes} bytes "
                                  "(--max-body-bytes)", [("connection", "close")])
            return
        body = b"".join(read.chunks)
        replayed = False

        async def receive_buffered() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, receive_buffered, send)

    async def _read(self, scope: Scope, receive: Receive, read: "_BodyRead") -> None:
        """The body into ``read.chunks``, until it ends or is known to be too large."""
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            read.too_large = True
            return
        while read.more:
            message = await receive()
            if message["type"] == "http.disconnect":
                read.gone = True
                return
            read.add(message)
            if read.size > self.max_bytes:
                read.too_large = True
                read.chunks.clear()
                return

    async def _drain(self, scope: Scope, receive: Receive, read: "_BodyRead", deadline: float) -> None:
        """Read and drop the rest of an oversized body, up to ``drain_bytes`` in all and the body's deadline."""
        headers = dict(scope["headers"])
        if headers.get(b"expect", b"").lower() == b"100-continue" and not read.size:
            return  # the client waits for an answer before it sends the body
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.drain_bytes:
            return
        try:
            async with asyncio.timeout_at(deadline):
                while read.more and read.size <= self.drain_bytes:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return
                    read.add(message, keep=False)
        except TimeoutError:
            return


def _declares_body(scope: Scope) -> bool:
    """Whether the request head announces a body: a ``Content-Length`` above 0 or any ``Transfer-Encoding``
    (h11 refuses a head whose length it cannot tell, so these two are every way a body can follow)."""
    headers = dict(scope["headers"])
    declared = headers.get(b"content-length", b"0").strip()
    return b"transfer-encoding" in headers or not (declared.isdigit() and int(declared) == 0)


class _BodyRead:
    """What has been read of a request body so far."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.more = True
        self.too_large = False
        self.gone = False

    def add(self, message: Message, keep: bool = True) -> None:
        chunk = message.get("body", b"")
        self.size += len(chunk)
        self.more = message.get("more_body", False)
        if keep:
            self.chunks.append(chunk)
