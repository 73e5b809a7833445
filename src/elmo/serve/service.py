"""What the endpoints share: the served models and indexes, the limits they apply to every request, and the
waits that give up when the client does. ``create_app`` makes one ``Service``; endpoints receive it through
FastAPI's dependency injection (``ServiceDep``) rather than from a closure."""

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import numpy as np
from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool

from elmo.embedder import Embedder
from elmo.serve.batching import DynamicBatcher, Hold, TokenBudget
from elmo.serve.config import ServeConfig
from elmo.serve.errors import ApiError, ClientGone
from elmo.serve.metrics import Metrics
from elmo.serve.search import SearchRunner, ServedIndex
from elmo.tokenizers import RefusedToken

_T = TypeVar("_T")


@dataclass
class ServedModel:
    name: str
    embedder: Embedder
    batcher: DynamicBatcher
    budget: TokenBudget
    fingerprint: str  # elmo.fingerprint of the embedder's model, computed once at start-up


@dataclass
class Service:
    """The app's state: every served model with its batcher and token budget, every served index, the threads
    that search, and the limits."""

    config: ServeConfig
    metrics: Metrics
    models: dict[str, ServedModel]
    indexes: dict[str, ServedIndex]
    searcher: SearchRunner

    def model(self, name: str | None) -> ServedModel:
        """The model a request names (field ``model``), or the only one served."""
        return _find("model", self.models, name)

    def index(self, name: str | None) -> ServedIndex:
        """The index a request names (field ``index``), or the only one served."""
        if not self.indexes:
            raise ApiError(404, "index_not_found", "this server holds no index (elmo serve --index)", "index")
        return _find("index", self.indexes, name)

    async def tokenize(self, model: ServedModel, sentences: list[Any]) -> list[list[str]]:
        """Each sentence's tokens, within the request limits; on a thread, as a long text takes a while to split."""
        return await run_in_threadpool(self._tokenize_all, model, sentences)

    async def tokenize_one(self, model: ServedModel, sentence: Any, field: str) -> list[str]:
        return await run_in_threadpool(self._tokenize, model, sentence, field)

    def hold(self, model: ServedModel, token_lists: list[list[str]], positions: int | None = None) -> Hold:
        """The request's tokens (or ``positions``, where its answer is padded to more), held in the model's budget
        until the hold is released (QueueFull past it)."""
        return model.budget.hold(sum(map(len, token_lists)) if positions is None else positions)

    async def all_layers(self, request: Request, model: ServedModel, token_lists: list[list[str]]) -> list[np.ndarray]:
        """Every layer of each sentence, through the model's batcher, unless the client leaves first."""
        return await _unless_gone(request, model.batcher.submit(token_lists, self.config.request_timeout_s))

    async def search(self, request: Request, work: Callable[[], _T]) -> _T:
        """``work`` on a search thread, unless the client leaves first."""
        return await _unless_gone(request, self.searcher.run(work))

    def _tokenize_all(self, model: ServedModel, sentences: list[Any]) -> list[list[str]]:
        config = self.config
        if len(sentences) > config.max_sentences:
            raise ApiError(413, "too_many_sentences", f"{len(sentences)} sentences; at most {config.max_sentences} "
                           "per request (--max-sentences)", "sentences")
        token_lists: list[list[str]] = []
        n_tokens = 0
        for i, sentence in enumerate(sentences):
            token_lists.append(self._tokenize(model, sentence, f"sentences[{i}]", n_tokens))
            n_tokens += len(token_lists[-1])
        return token_lists

    def _tokenize(self, model: ServedModel, sentence: Any, field: str, tokens_before: int = 0) -> list[str]:
        config = self.config
        try:
            tokens = model.embedder.tokenize(sentence)
        except RefusedToken as error:  # given tokens (raw text's lone surrogates were refused on reading)
            raise ApiError(422, "invalid_request", str(error), f"{field}[{error.position}]") from None
        if not tokens:
            raise ApiError(422, "invalid_request", "the sentence has no tokens", field)
        if config.long_sentences == "refuse" and len(tokens) > config.max_sentence_tokens:
            raise ApiError(413, "sentence_too_long", f"{len(tokens)} tokens; at most {config.max_sentence_tokens}"
                           " per sentence (--max-sentence-tokens)", field)
        total = tokens_before + len(tokens)
        if total > config.max_request_tokens:
            counted = f"{len(tokens)} tokens" + (f" ({total} with the sentences before it)" if tokens_before else "")
            raise ApiError(413, "too_many_tokens", f"{counted}; at most {config.max_request_tokens} per request "
                           "(--max-request-tokens)", field)
        return tokens


def _find(kind: str, served: dict[str, _T], name: str | None) -> _T:
    if name is None:
        if len(served) == 1:
            return next(iter(served.values()))
        raise ApiError(422, "invalid_request", f"required when more than one {kind} is served "
                       f"({', '.join(served)})", kind)
    if name not in served:
        raise ApiError(404, f"{kind}_not_found", f"unknown {kind} {name!r}; served: {', '.join(served)}", kind)
    return served[name]


def _service(request: Request) -> Service:
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(_service)]


async def _unless_gone(request: Request, work: Awaitable[_T]) -> _T:
    """``work``'s result, unless the client disconnects first: then ``work`` is cancelled (a queued job leaves
    the queue at once) and ClientGone raised. The body has been read, so the next ASGI message can only be
    ``http.disconnect``."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((task, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, watcher):
            if not pending.done():
                pending.cancel()
    if not task.done() or task.cancelled():
        raise ClientGone
    return task.result()


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def negotiate(accept: str | None, offered: tuple[str, ...]) -> str:
    """The one of ``offered`` that Accept rates highest, the first of them on a tie; 406 if it rates all of them
    0. Each is rated by the most specific range that names it (RFC 9110: ``type/sub`` over ``type/*`` over
    ``*/*``), so ``application/json;q=0, */*`` excludes JSON."""
    ranges = []
    for item in (accept or "*/*").split(","):
        media_type, *params = (part.strip().lower() for part in item.split(";"))
        quality = next((float(p[2:]) for p in params if p.startswith("q=") and _is_number(p[2:])), 1.0)
        ranges.append((media_type, quality))

    def rating(offer: str) -> float:
        names = (offer, offer.split("/")[0] + "/*", "*/*")  # most specific first
        matching = [(-names.index(media_type), quality) for media_type, quality in ranges if media_type in names]
        return max(matching)[1] if matching else 0.0

    best = max(offered, key=lambda offer: (rating(offer), -offered.index(offer)))
    if rating(best) <= 0:
        raise ApiError(406, "not_acceptable", f"Accept {accept!r}: this endpoint answers {', '.join(offered)}",
                       "Accept")
    return best


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
