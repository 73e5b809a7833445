"""Every refusal the service answers, mapped to a response in one place (``add_error_handlers``), so endpoints
raise and never build error answers themselves.

The library's typed errors (``elmo.search.SearchError``, the batcher's ``QueueFull`` and ``ShuttingDown``, a
``TimeoutError``) come through as they are; ``ApiError`` is the service's own (a model or index not served, a
request over a limit). Every answer has the one error shape of ``guards.error_payload``.
"""

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from elmo.search.errors import SearchError
from elmo.serve.batching import QueueFull, ShuttingDown
from elmo.serve.config import ServeConfig
from elmo.serve.guards import CLIENT_CLOSED, error_payload
from elmo.serve.schemas import REQUEST_FIELDS


class ApiError(Exception):
    """A request the service refuses, with the status and the field at fault."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field


class ClientGone(Exception):
    """The client closed its connection before its answer was ready."""


REFUSALS = (ApiError, SearchError, QueueFull, ShuttingDown, TimeoutError, ClientGone, StarletteHTTPException)


def add_error_handlers(app: FastAPI, config: ServeConfig) -> None:
    """``refusal`` answers every error of ``REFUSALS``; a body pydantic refused is answered naming its field; any
    other error is the service's own failure (``_failed``)."""

    async def refused(_: Request, error: Exception) -> JSONResponse:
        return refusal(error, config)

    for kind in REFUSALS:
        app.add_exception_handler(kind, refused)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(Exception, _failed)


async def _failed(_: Request, error: Exception) -> JSONResponse:
    """A failure of the service itself (the model raised: out of memory, say), answered in the one error shape
    rather than Starlette's plain-text 500; Starlette raises the error on after this answer, so the server's log
    holds its traceback. A failed batch fails every request merged into it."""
    return _answer(500, "internal_error", f"the service failed answering this request ({type(error).__name__}); "
                   "its log holds the details")


def refusal(error: Exception, config: ServeConfig) -> JSONResponse:
    """The answer to each refusal. A full queue, a stopping service and a timeout are answers clients can act on
    (503 with Retry-After, 504); a vanished client is 499 (answered to nobody, but counted in the metrics, as
    nginx counts it)."""
    retry = {"Retry-After": str(config.retry_after_s)}
    match error:
        case ApiError():
            return _answer(error.status, error.code, error.message, error.field)
        case SearchError():
            return _answer(422, error.code, str(error), error.field)
        case QueueFull():
            return _answer(503, "overloaded", f"{error}; retry later", headers=retry)
        case ShuttingDown():
            return _answer(503, "shutting_down", str(error), headers=retry)
        case TimeoutError():
            return _answer(504, "timeout", f"not answered within {config.request_timeout_s:g} s (--request-timeout)")
        case ClientGone():
            return _answer(CLIENT_CLOSED, "client_closed", "the client closed the connection before its answer")
        case StarletteHTTPException():
            return _answer(error.status_code, "http_error", str(error.detail), headers=error.headers)
    raise TypeError(f"{type(error).__name__} is not a refusal") from error


def _answer(status: int, code: str, message: str, field: str | None = None,
            headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_payload(code, message, field), status, headers)


async def _invalid_request(request: Request, error: Exception) -> JSONResponse:
    """pydantic's refusal of a body (a RequestValidationError: Starlette types every handler as taking any
    Exception) as one error naming the most specific field, or the body's media type or syntax at fault."""
    if not isinstance(error, RequestValidationError):
        raise TypeError(f"{type(error).__name__} is not a refused request body") from error
    # FastAPI hands validation the raw bytes exactly when it did not read the body as JSON: a media type other
    # than application/json or application/*+json (text/json too), or none at all, which it refuses on purpose
    # (a browser may send such a body cross-site without asking first: strict_content_type).
    if isinstance(error.body, bytes):
        content_type = request.headers.get("content-type")
        sent = f"the body is {content_type}" if content_type else "the body has no Content-Type"
        return _answer(415, "unsupported_media_type", f"{sent}; send JSON with Content-Type: application/json",
                       "Content-Type")
    problems = error.errors()
    if any(problem["type"] == "json_invalid" for problem in problems):
        detail = next(p for p in problems if p["type"] == "json_invalid")
        context = detail.get("ctx", {}).get("error", "")
        return _answer(400, "malformed_json", f"the body is not valid JSON: {context}", "body")
    first = problems[0]
    if first["type"] == "extra_forbidden":  # name the unexpected field itself
        return _answer(422, "invalid_request", "unexpected field", str(first["loc"][-1]))
    # A union reports each member's failure; the deepest path is the most specific one ([0][1], not [0]),
    # and a value the member's type took but refused (a NaN weight, a lone surrogate) says more than the
    # other members' "Input should be a valid ...".
    paths = [_field_path(tuple(p["loc"])) for p in problems]
    field = max(paths, key=lambda path: path.count("[") + path.count("."))
    at_field = [p for p, path in zip(problems, paths, strict=True) if path == field]
    refused = [p for p in at_field if not p["type"].endswith("_type")]
    messages = dict.fromkeys(p["msg"].removeprefix("Value error, ") for p in (refused or at_field))
    return _answer(422, "invalid_request", " or ".join(messages), field)


def _field_path(location: tuple[Any, ...]) -> str:
    """pydantic's ``("body", "sentences", 2, "list[str]", 0)`` -> ``sentences[2][0]`` (union tags dropped)."""
    path = ""
    for part in location[1:]:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in REQUEST_FIELDS:
            path += f".{part}" if path else part
    return path or "body"
