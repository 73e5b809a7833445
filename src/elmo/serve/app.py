"""The HTTP service: ``create_app`` turns loaded embedders and a ``ServeConfig`` into a FastAPI app.

Endpoints: ``POST /v1/embed``, ``POST /v1/similarity``, ``GET /v1/models``, contextual search over served
indexes (``POST /v1/neighbors``, ``POST /v1/senses``, ``GET /v1/indexes``), ``GET /healthz``,
``GET /metrics``, the sense page at ``/`` and the OpenAPI docs at ``/docs`` (Swagger UI served from the
package, so it works offline). The app holds no per-client state, so any number of replicas can sit
behind a load balancer.
"""

import asyncio
import io
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import numpy as np
import orjson
import swagger_ui_bundle
from fastapi import FastAPI, Header, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from elmo.embedder import Embedder, layer_weights, mix_layers
from elmo.search.index import ContextIndex
from elmo.search.senses import Senses, senses
from elmo.serve.batching import DynamicBatcher, Hold, QueueFull, ShuttingDown, TokenBudget
from elmo.serve.config import ServeConfig
from elmo.serve.guards import BearerAuth, BodySizeLimit, RequestMetrics, error_payload
from elmo.serve.metrics import Metrics
from elmo.serve.search import SearchRunner, ServedIndex, open_index, senses_png
from elmo.similarity import average_linkage_groups, cosine_matrices, find_occurrences

STATIC_DIR = Path(__file__).parent / "static"
NPY_TYPES = ("application/x-npy", "application/octet-stream")
MAX_OCCURRENCES = 32  # the page's heat map and the O(N^3) grouping stay small
MAX_NEIGHBORS = 100
MAX_SENSES = 32
SENSE_SAMPLE = 2000  # occurrences clustered at most (a random sample of them beyond): senses' max_occurrences
ENDPOINTS = ("/", "/healthz", "/metrics", "/v1/models", "/v1/embed", "/v1/similarity", "/v1/indexes",
             "/v1/neighbors", "/v1/senses")
SLICE_BYTES = 1 << 18  # an answer is sent in slices this big, each once the client has taken most of the last
_T = TypeVar("_T")


def _unicode(text: str) -> str:
    """JSON's ``\\ud800`` escape decodes to a lone surrogate, which is no Unicode text and which no UTF-8 answer
    can carry: refused here, before any model time is spent on it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"holds a lone surrogate (\\u{ord(text[error.start]):04x} at character {error.start}); "
                         "send valid Unicode text") from None
    return text


def _layer_name(text: str) -> str:
    """What ``ContextIndex.layer`` reads, in ASCII: ``str.isdigit`` would take ``"\uff12"`` (a full-width 2)."""
    number = text.removeprefix("layer")
    if text != "average" and not (number.isascii() and number.isdigit()):
        raise ValueError(f"{text!r}: expected a layer number in ASCII digits (2 or 'layer2') or 'average'")
    return text


Text = Annotated[str, AfterValidator(_unicode)]
Sentence = Text | list[Text]
Weight = Annotated[float, Field(allow_inf_nan=False)]
LayerName = Annotated[str, AfterValidator(_layer_name)]


class EmbedRequest(BaseModel):
    """Sentences are raw strings (split by the model's tokenizer) or token lists (used as given)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: Text | None = Field(None, description="a served model's name; may be left out when only one is served")
    sentences: list[Sentence] = Field(min_length=1, examples=[["The bank of the river .", ["She", "sat"]]])
    layers: Literal["all", "top", "average"] | list[Weight] = Field(
        "top", description="all: (L+1, T, 2P) per sentence; top, average, or one mixing weight per layer: (T, 2P)")
    pooling: Literal["none", "mean"] = Field("none", description="mean: average over the tokens, (2P,) or (L+1, 2P)")


class SimilarityRequest(BaseModel):
    """Every occurrence of ``word`` in ``sentences``; the cosine of their vectors, layer by layer."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: Text | None = None
    word: Text = Field(min_length=1, examples=["bank"])
    sentences: list[Sentence] = Field(min_length=1, examples=[["I sat on the river bank .", "The bank was shut ."]])
    match_case: bool = False
    n_groups: int = Field(2, ge=1, le=MAX_OCCURRENCES, description="how many groups the occurrences are split into")


class NeighborsRequest(BaseModel):
    """The indexed uses nearest to ``word`` as used in ``sentence``, and its nearest words under layer 0."""

    model_config = ConfigDict(extra="forbid", strict=True)

    index: Text | None = Field(None, description="a served index's name; may be left out when only one is served")
    sentence: Sentence = Field(examples=["He signed to do a Broadway play ."])
    word: Text = Field(min_length=1, examples=["play"], description="a token of the sentence, any case")
    occurrence: int = Field(0, ge=0, description="which use of the word in the sentence, 0-based")
    k: int = Field(10, ge=1, le=MAX_NEIGHBORS, description="neighbours (and static neighbours) returned")
    layer: int | LayerName | None = Field(None, description="an indexed layer (2, 'layer2' or 'average'); "
                                                      "default: the first the index holds")
    same_word: bool = Field(False, description="only uses of the same word (ignoring case), searched exactly")
    exact: bool = Field(False, description="brute force over every indexed token instead of the ANN index")


class SensesRequest(BaseModel):
    """A word's indexed uses clustered into senses (k-means on their unit vectors)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    index: Text | None = None
    word: Text = Field(min_length=1, examples=["play"])
    clusters: int | None = Field(None, ge=1, le=MAX_SENSES, description="default: the count of 2..6 with the "
                                                                        "best silhouette")
    layer: int | LayerName | None = None


REQUEST_FIELDS = frozenset().union(*(model.model_fields for model in (EmbedRequest, SimilarityRequest,
                                                                       NeighborsRequest, SensesRequest)))


class ApiError(Exception):
    """A request the service refuses, with the status, the field at fault and any headers to send."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field, self.headers = status, code, message, field, headers


class ClientGone(Exception):
    """The client closed its connection before its answer was ready."""


@dataclass
class ServedModel:
    name: str
    embedder: Embedder
    batcher: DynamicBatcher
    budget: TokenBudget


class HeldResponse(Response):
    """An answer sent in slices of ``SLICE_BYTES``, each once the client has taken most of the one before
    (uvicorn waits for its write buffer to drain), that gives its tokens back to the model's budget after its
    last slice, or once the client is gone. So a client that does not read holds no more than its own budget,
    and only until ``--write-timeout`` cuts it off."""

    def __init__(self, content: bytes, hold: Hold, media_type: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(content, media_type=media_type, headers=headers)
        self.hold = hold

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            body = memoryview(self.body)
            for start in range(0, max(len(body), 1), SLICE_BYTES):
                end = start + SLICE_BYTES
                await send({"type": "http.response.body", "body": bytes(body[start:end]), "more_body": end < len(body)})
        finally:
            self.hold.release()


class _JsonRequest(Request):
    """A request whose JSON body that cannot be decoded (not UTF-8, nested past the parser's depth) is reported
    as FastAPI reports any JSON syntax error (``json.JSONDecodeError``), so it is answered ``malformed_json``.

    The parser stays the standard library's, which reads ``NaN`` and ``1e400`` as floats: the request models
    then refuse them naming the field (``layers[0]``), which a stricter parser could not say."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = json.loads(body.decode("utf-8"))
            except UnicodeDecodeError as error:
                raise json.JSONDecodeError(f"not UTF-8 ({error.reason})", body.decode("utf-8", "replace"),
                                           error.start) from None
            except RecursionError:
                raise json.JSONDecodeError("nested too deeply", "", 0) from None
        return self._json


class _JsonRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Awaitable[Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            return await handler(_JsonRequest(request.scope, request.receive))

        return route


def create_app(embedders: dict[str, Embedder], config: ServeConfig,
               indexes: dict[str, tuple[str | Path, str]] | None = None) -> FastAPI:
    """``embedders`` maps the names requests use to loaded models; each gets its own batcher. ``indexes`` maps
    the names search requests use to an index directory and the served model that embeds its queries (the one
    it was built with; ``elmo.serve.search.model_for_index``). ValueError if an index does not fit its model."""
    if not embedders:
        raise ValueError("serve at least one model")
    metrics = Metrics()
    served: dict[str, ServedModel] = {}
    for name, embedder in embedders.items():
        batcher = DynamicBatcher(embedder, name, config.max_batch_tokens, config.max_wait_ms / 1000, config.max_queue,
                                 config.batch_size, on_batch=partial(metrics.record_batch, name))
        budget = TokenBudget(name, config.max_queue_tokens)
        metrics.watch(batcher, budget)
        served[name] = ServedModel(name, embedder, batcher, budget)
    served_indexes: dict[str, ServedIndex] = {}
    for name, (directory, model_name) in (indexes or {}).items():
        model = served[model_name]
        served_indexes[name] = open_index(name, directory, model_name, model.embedder, model.batcher,
                                          config.request_timeout_s)
    searcher = SearchRunner(config.max_queue, config.request_timeout_s)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        for model in served.values():
            model.batcher.start()
        yield
        # uvicorn calls this after in-flight requests have been answered; stop() still runs any job left.
        for model in served.values():
            await model.batcher.stop()
        await searcher.stop()

    app = FastAPI(title="elmo", summary="ELMo contextual word vectors over HTTP", lifespan=lifespan,
                  docs_url=None, redoc_url=None)
    app.router.route_class = _JsonRoute
    app.state.config = config
    app.state.metrics = metrics
    app.state.served = served
    app.state.indexes = served_indexes
    _add_error_handlers(app)

    def find_model(name: str | None) -> ServedModel:
        if name is None:
            if len(served) == 1:
                return next(iter(served.values()))
            raise ApiError(422, "invalid_request", f"required when several models are served ({', '.join(served)})",
                           "model")
        if name not in served:
            raise ApiError(404, "model_not_found", f"unknown model {name!r}; served: {', '.join(served)}", "model")
        return served[name]

    def find_index(name: str | None) -> ServedIndex:
        if not served_indexes:
            raise ApiError(404, "index_not_found", "this server holds no index (elmo serve --index)", "index")
        if name is None:
            if len(served_indexes) == 1:
                return next(iter(served_indexes.values()))
            raise ApiError(422, "invalid_request", "required when several indexes are served "
                           f"({', '.join(served_indexes)})", "index")
        if name not in served_indexes:
            raise ApiError(404, "index_not_found", f"unknown index {name!r}; served: {', '.join(served_indexes)}",
                           "index")
        return served_indexes[name]

    def index_layer(index: ContextIndex, layer: int | str | None) -> str:
        try:
            return index.layer(layer)
        except ValueError as error:
            raise ApiError(422, "invalid_request", str(error), "layer") from None

    def tokenize_one(model: ServedModel, sentence: Any, field: str, tokens_before: int = 0) -> list[str]:
        tokens = model.embedder.tokenize(sentence)
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

    def tokenize_all(model: ServedModel, sentences: list[Any]) -> list[list[str]]:
        if len(sentences) > config.max_sentences:
            raise ApiError(413, "too_many_sentences", f"{len(sentences)} sentences; at most {config.max_sentences} "
                           "per request (--max-sentences)", "sentences")
        token_lists: list[list[str]] = []
        n_tokens = 0
        for i, sentence in enumerate(sentences):
            token_lists.append(tokenize_one(model, sentence, f"sentences[{i}]", n_tokens))
            n_tokens += len(token_lists[-1])
        return token_lists

    async def tokenize(model: ServedModel, sentences: list[Any]) -> list[list[str]]:
        """Each sentence's tokens, within the token limits; on a thread, as a long text takes a while to split."""
        return await run_in_threadpool(tokenize_all, model, sentences)

    async def tokenize_sentence(model: ServedModel, sentence: Any, field: str) -> list[str]:
        return await run_in_threadpool(tokenize_one, model, sentence, field)

    def hold(model: ServedModel, token_lists: list[list[str]]) -> Hold:
        with refusals():
            return model.budget.hold(sum(map(len, token_lists)))

    @contextmanager
    def refusals() -> Iterator[None]:
        """A full queue, a stopping service, a timeout and a vanished client as the errors clients can act on
        (the last is answered to nobody, but counted in the metrics as 499, as nginx counts it)."""
        try:
            yield
        except ClientGone:
            raise ApiError(499, "client_closed", "the client closed the connection before its answer") from None
        except QueueFull as error:
            raise ApiError(503, "overloaded", f"{error}; retry later", None,
                           {"Retry-After": str(config.retry_after_s)}) from None
        except ShuttingDown as error:
            raise ApiError(503, "shutting_down", str(error), None, {"Retry-After": str(config.retry_after_s)}) from None
        except TimeoutError:
            raise ApiError(504, "timeout", f"not answered within {config.request_timeout_s:g} s "
                           "(--request-timeout)") from None

    async def all_layers(request: Request, model: ServedModel, token_lists: list[list[str]]) -> list[np.ndarray]:
        with refusals():
            return await _unless_gone(request, model.batcher.submit(token_lists, config.request_timeout_s))

    async def run_search(request: Request, work: Callable[[], Any]) -> Any:
        """``work`` on a search thread; what ``elmo.search`` refuses (ValueError, with the ``field`` at fault
        if it names one) is the client's input."""
        with refusals():
            try:
                return await _unless_gone(request, searcher.run(work))
            except ValueError as error:
                raise ApiError(422, "invalid_request", str(error), getattr(error, "field", None)) from None

    @app.post("/v1/embed", response_model=None, responses={200: {"content": {
        "application/json": {}, "application/x-npy": {}, "application/octet-stream": {}},
        "description": "JSON, or one float32 .npy of shape (N, [L+1,] T_max, 2P) zero-padded past each sentence's "
                       "length (lengths in X-Sentence-Lengths), or (N, [L+1,] 2P) with pooling=mean"}})
    async def embed(request: Request, body: EmbedRequest,
                    accept: Annotated[str | None, Header()] = None) -> Response:
        """Vectors for each sentence: choose the layers, pool over tokens or not, JSON or .npy by Accept."""
        media_type = _negotiate(accept)
        model = find_model(body.model)
        try:
            weights = layer_weights(body.layers, model.embedder.n_layers)
        except ValueError as error:
            raise ApiError(422, "invalid_request", str(error), "layers") from None
        token_lists = await tokenize(model, body.sentences)
        held = hold(model, token_lists)  # given back by HeldResponse after the last byte, or below on failure
        try:
            layers = await all_layers(request, model, token_lists)

            # On a thread: the event loop runs while numpy mixes. orjson holds the GIL while it writes, for a
            # time that --max-request-tokens bounds.
            def answer() -> tuple[bytes, dict[str, str]]:
                outputs = [_pool(mix_layers(vectors, weights), body.pooling) for vectors in layers]
                if media_type != "application/json":
                    return _npy_body(outputs, token_lists, body.pooling)
                payload = {"model": model.name, "layers": body.layers, "pooling": body.pooling,
                           "n_layers": model.embedder.n_layers, "dim": model.embedder.dim,
                           "embeddings": [{"tokens": tokens, "vectors": np.ascontiguousarray(vectors)}
                                          for tokens, vectors in zip(token_lists, outputs, strict=True)]}
                # orjson writes each float32 in its shortest exact form, ~30x faster than json on .tolist()
                return orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY), {}

            content, headers = await run_in_threadpool(answer)
            return HeldResponse(content, held, media_type, headers)
        except BaseException:
            held.release()
            raise

    @app.post("/v1/similarity")
    async def similarity(request: Request, body: SimilarityRequest) -> dict[str, Any]:
        """Cosine similarity of every occurrence of ``word``, per layer, and the groups they fall into
        (average-linkage clustering into ``n_groups``): the same word in different senses should split."""
        model = find_model(body.model)
        token_lists = await tokenize(model, body.sentences)
        occurrences = find_occurrences(token_lists, body.word, body.match_case)
        if not 2 <= len(occurrences) <= MAX_OCCURRENCES:
            raise ApiError(422, "invalid_request", f"{body.word!r} occurs {len(occurrences)} time(s); need 2 to "
                           f"{MAX_OCCURRENCES} occurrences to compare", "word")
        held = hold(model, token_lists)
        try:
            layers = await all_layers(request, model, token_lists)
            vectors = np.stack([layers[s][:, p] for s, p in occurrences], axis=1)  # (L+1, N, 2P)
        finally:
            held.release()
        matrices = cosine_matrices(vectors)
        n_groups = min(body.n_groups, len(occurrences))
        return {"model": model.name, "word": body.word, "n_layers": model.embedder.n_layers,
                "tokens": token_lists,
                "occurrences": [{"sentence": s, "position": p, "token": token_lists[s][p]} for s, p in occurrences],
                "similarity": matrices.tolist(),
                "groups": [average_linkage_groups(matrix, n_groups) for matrix in matrices]}

    @app.post("/v1/neighbors")
    async def neighbors(request: Request, body: NeighborsRequest) -> dict[str, Any]:
        """The ``k`` indexed uses nearest to ``word`` as used in ``sentence`` (``ContextIndex.neighbors``: the
        sentence is embedded by the index's model, through its batcher), and the ``k`` nearest words to it under
        layer 0, which has no context (``static``)."""
        served_index = find_index(body.index)
        index = served_index.index
        layer = index_layer(index, body.layer)
        model = served[served_index.model]
        tokens = await tokenize_sentence(model, body.sentence, "sentence")
        uses = find_occurrences([tokens], body.word, match_case=False)
        if not uses:
            raise ApiError(422, "word_not_in_sentence", f"{body.word!r} is not a token of the sentence "
                           f"{' '.join(tokens)!r}", "word")
        if body.occurrence >= len(uses):
            raise ApiError(422, "invalid_request", f"{body.word!r} occurs {len(uses)} time(s) in the sentence; "
                           f"occurrence {body.occurrence} is out of range", "occurrence")

        def search() -> dict[str, Any]:
            if body.same_word and not len(index.rows_of(body.word)):
                raise ApiError(422, "word_not_indexed", f"{body.word!r} does not occur among the indexed tokens "
                               f"of index {served_index.name!r}", "word")
            found = index.neighbors(tokens, body.word, body.k, layer, body.same_word, body.exact, body.occurrence)
            form = index.vocabulary_form(body.word)
            static = index.static_vectors.nearest(form, body.k) if form is not None else []
            return {"index": served_index.name, "layer": layer, "word": body.word, "tokens": tokens,
                    "token_index": uses[body.occurrence][1],
                    "neighbors": [neighbor.to_json() for neighbor in found],
                    "static_word": form, "static": [{"word": word, "score": score} for word, score in static]}

        held = hold(model, [tokens])
        try:
            return await run_search(request, search)
        finally:
            held.release()

    @app.post("/v1/senses", response_model=None, responses={200: {"content": {
        "application/json": {}, "image/png": {}},
        "description": "JSON (clusters, their sizes and example uses, silhouette), or the sense map as PNG"}})
    async def senses_endpoint(request: Request, body: SensesRequest,
                              accept: Annotated[str | None, Header()] = None) -> Response:
        """The indexed uses of ``word`` clustered into senses (``elmo.search.senses``): each cluster's size and
        the use nearest its centre; with ``Accept: image/png``, the map ``elmo senses`` draws."""
        media_type = _negotiate(accept, ("application/json", "image/png"))
        served_index = find_index(body.index)
        index = served_index.index
        layer = index_layer(index, body.layer)

        def cluster() -> Response:
            n_uses = len(index.rows_of(body.word))
            if n_uses < 3:
                raise ApiError(422, "too_few_occurrences", f"{body.word!r} occurs {n_uses} time(s) among the "
                               f"indexed tokens of index {served_index.name!r}; at least 3 are needed to find "
                               "senses", "word")
            if body.clusters is not None and body.clusters > min(n_uses, SENSE_SAMPLE):
                raise ApiError(422, "invalid_request", f"{body.clusters} clusters of {min(n_uses, SENSE_SAMPLE)} "
                               f"uses of {body.word!r}", "clusters")
            result = senses(index, body.word, body.clusters, layer, max_occurrences=SENSE_SAMPLE)
            if media_type == "image/png":
                return Response(senses_png(result), media_type="image/png")
            return JSONResponse(_senses_json(served_index.name, result))

        return await run_search(request, cluster)

    @app.get("/v1/indexes")
    async def list_indexes() -> dict[str, Any]:
        """The served indexes: their layers and sizes, and the model that embeds their query sentences."""
        return {"indexes": [served_index.describe() for served_index in served_indexes.values()]}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        """The served models and the limits that apply to them."""
        return {"models": [{"name": m.name, "n_layers": m.embedder.n_layers, "dim": m.embedder.dim,
                            "tokenizer": m.embedder.tokenizer_name, "device": str(m.embedder.device)}
                           for m in served.values()],
                "limits": {"max_body_bytes": config.max_body_bytes, "max_sentences": config.max_sentences,
                           "max_sentence_tokens": config.max_sentence_tokens, "long_sentences": config.long_sentences,
                           "max_request_tokens": config.max_request_tokens, "max_queue": config.max_queue,
                           "max_queue_tokens": config.max_queue_tokens, "request_timeout_s": config.request_timeout_s}}

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        """Liveness and readiness for a load balancer: the models are loaded and their batchers running."""
        return {"status": "ok", "models": list(served)}

    @app.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
    async def prometheus() -> Response:
        """Prometheus text format: requests, latency, batch sizes, queue depth."""
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title="elmo API",
                                   swagger_js_url="/docs-assets/swagger-ui-bundle.js",
                                   swagger_css_url="/docs-assets/swagger-ui.css",
                                   swagger_favicon_url="/docs-assets/favicon-32x32.png")

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.mount("/docs-assets", StaticFiles(directory=str(swagger_ui_bundle.swagger_ui_path)), name="docs-assets")
    # Outermost first: metrics see every answer, auth runs before the body is read, the limit before parsing.
    app.add_middleware(BodySizeLimit, max_bytes=config.max_body_bytes, timeout_s=config.body_timeout_s,
                       drain_bytes=config.drain_bytes)
    app.add_middleware(BearerAuth, api_keys=config.api_keys)
    app.add_middleware(RequestMetrics, metrics=metrics, endpoints=ENDPOINTS)
    return app


def _negotiate(accept: str | None, offered: tuple[str, ...] = ("application/json", *NPY_TYPES)) -> str:
    """The first of ``offered`` unless Accept prefers another of them; 406 if it allows none of them."""
    best, best_quality = None, 0.0
    for item in (accept or "*/*").split(","):
        media_type, *params = (part.strip() for part in item.split(";"))
        quality = next((float(p[2:]) for p in params if p.startswith("q=") and _is_number(p[2:])), 1.0)
        matches = [t for t in offered if media_type in (t, "*/*", t.split("/")[0] + "/*")]
        if matches and quality > best_quality:
            best, best_quality = matches[0], quality
    if best is None:
        raise ApiError(406, "not_acceptable", f"Accept {accept!r}: this endpoint answers {', '.join(offered)}",
                       "Accept")
    return best


def _senses_json(index_name: str, result: Senses) -> dict[str, Any]:
    return {"index": index_name, "word": result.word, "layer": result.layer, "occurrences": len(result.rows),
            "silhouette": result.silhouette,
            "clusters": [{"size": size, "sentence": example.sentence, "token_index": example.token_index,
                          "token": example.token, "line": example.line}
                         for size, example in zip(result.sizes, result.examples, strict=True)]}


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _pool(vectors: np.ndarray, pooling: str) -> np.ndarray:
    """``mean`` averages over the token axis (second to last): ``(..., T, D)`` -> ``(..., D)``."""
    return vectors.mean(axis=-2) if pooling == "mean" else vectors


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


def _npy_body(outputs: list[np.ndarray], token_lists: list[list[str]], pooling: str) -> tuple[bytes, dict[str, str]]:
    lengths = [len(tokens) for tokens in token_lists]
    if pooling == "mean":
        stacked = np.stack(outputs)
    else:
        token_axis = outputs[0].ndim - 2
        shape = (len(outputs), *outputs[0].shape[:token_axis], max(lengths), outputs[0].shape[-1])
        stacked = np.zeros(shape, np.float32)
        for i, vectors in enumerate(outputs):
            stacked[i, ..., : lengths[i], :] = vectors
    buffer = io.BytesIO()
    np.save(buffer, stacked.astype(np.float32, copy=False), allow_pickle=False)
    return buffer.getvalue(), {"X-Sentence-Lengths": ",".join(map(str, lengths))}


def _field_path(location: tuple[Any, ...]) -> str:
    """pydantic's ``("body", "sentences", 2, "list[str]", 0)`` -> ``sentences[2][0]`` (union tags dropped)."""
    path = ""
    for part in location[1:]:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in REQUEST_FIELDS:
            path += f".{part}" if path else part
    return path or "body"


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_: Request, error: ApiError) -> JSONResponse:
        return JSONResponse(error_payload(error.code, error.message, error.field), error.status, error.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        content_type = request.headers.get("content-type", "application/json")
        if not content_type.split(";")[0].strip().lower().endswith("json"):
            return JSONResponse(error_payload("unsupported_media_type", f"the body is {content_type}; "
                                              "send JSON with Content-Type: application/json", "Content-Type"), 415)
        problems = error.errors()
        if any(problem["type"] == "json_invalid" for problem in problems):
            detail = next(p for p in problems if p["type"] == "json_invalid")
            context = detail.get("ctx", {}).get("error", "")
            return JSONResponse(error_payload("malformed_json", f"the body is not valid JSON: {context}", "body"), 400)
        first = problems[0]
        if first["type"] == "extra_forbidden":  # name the unexpected field itself
            return JSONResponse(error_payload("invalid_request", "unexpected field", str(first["loc"][-1])), 422)
        # A union reports each member's failure; the deepest path is the most specific one ([0][1], not [0]),
        # and a value the member's type took but refused (a NaN weight, a lone surrogate) says more than the
        # other members' "Input should be a valid ...".
        paths = [_field_path(tuple(p["loc"])) for p in problems]
        field = max(paths, key=lambda path: path.count("[") + path.count("."))
        at_field = [p for p, path in zip(problems, paths, strict=True) if path == field]
        refused = [p for p in at_field if not p["type"].endswith("_type")]
        messages = dict.fromkeys(p["msg"].removeprefix("Value error, ") for p in (refused or at_field))
        return JSONResponse(error_payload("invalid_request", " or ".join(messages), field), 422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, error: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(error_payload("http_error", str(error.detail)), error.status_code, error.headers)
