"""The HTTP service: ``create_app`` turns loaded embedders and a ``ServeConfig`` into a FastAPI app.

Endpoints: ``POST /v1/embed``, ``POST /v1/tokenize``, ``POST /v1/similarity``, ``GET /v1/models``
(``embed_routes.py``), contextual search over served indexes (``POST /v1/neighbors``, ``POST /v1/senses``,
``GET /v1/indexes``; ``search_routes.py``), and here ``GET /healthz``, ``GET /metrics``, the sense page at ``/``
and the OpenAPI docs at ``/docs`` (Swagger UI served from the package, so it works offline). Refusals are
answered in ``errors.py``.
The app holds no per-client state, so any number of replicas can sit behind a load balancer.
"""

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import swagger_ui_bundle
from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles

from elmo.embedder import Embedder
from elmo.serve import embed_routes, search_routes
from elmo.serve.batching import DynamicBatcher, TokenBudget
from elmo.serve.config import ServeConfig
from elmo.serve.errors import add_error_handlers
from elmo.serve.guards import BearerAuth, BodySizeLimit, RequestMetrics
from elmo.serve.metrics import Metrics
from elmo.serve.search import SearchRunner, ServedIndex, open_index
from elmo.serve.service import ServedModel, Service, ServiceDep

STATIC_DIR = Path(__file__).parent / "static"

router = APIRouter()


def create_app(embedders: dict[str, Embedder], config: ServeConfig,
               indexes: Mapping[str, tuple[str | Path, str]] | None = None) -> FastAPI:
    """``embedders`` maps the names requests use to loaded models; each gets its own batcher, and each must window
    long sentences as ``config`` says (``max_window_tokens``, ``window_context``), since ``/v1/models`` reports
    the config's windows as the ones in force. ``indexes`` maps the names search requests use to an index
    directory and the served model that embeds its queries (the one it was built with;
    ``elmo.serve.search.model_for_index``). ValueError if an embedder's windows or an index do not fit."""
    if not embedders:
        raise ValueError("serve at least one model")
    for name, embedder in embedders.items():
        _check_windows(name, embedder, config)
    metrics = Metrics()
    served: dict[str, ServedModel] = {}
    for name, embedder in embedders.items():
        batcher = DynamicBatcher(embedder, name, config.max_batch_tokens, config.max_wait_ms / 1000, config.max_queue,
                                 config.batch_size, on_batch=partial(metrics.record_batch, name))
        budget = TokenBudget(name, config.max_queue_tokens)
        metrics.watch(batcher, budget)
        served[name] = ServedModel(name, embedder, batcher, budget, embedder.fingerprint)
    served_indexes: dict[str, ServedIndex] = {}
    for name, (directory, model_name) in (indexes or {}).items():
        model = served[model_name]
        served_indexes[name] = open_index(name, directory, model_name, model.embedder, model.batcher,
                                          config.request_timeout_s, model.fingerprint)
    service = Service(config, metrics, served, served_indexes, SearchRunner(config.max_queue, config.request_timeout_s))

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        for model in served.values():
            model.batcher.start()
        yield
        # uvicorn calls this after in-flight requests have been answered; stop() still runs any job left.
        for model in served.values():
            await model.batcher.stop()
        await service.searcher.stop()

    app = FastAPI(title="elmo", summary="ELMo contextual word vectors over HTTP", lifespan=lifespan,
                  docs_url=None, redoc_url=None)
    app.state.service = service
    routers = (embed_routes.router, search_routes.router, router)
    for routes in routers:
        app.include_router(routes)
    add_error_handlers(app, config)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.mount("/docs-assets", StaticFiles(directory=str(swagger_ui_bundle.swagger_ui_path)), name="docs-assets")
    # Outermost first: metrics see every answer (labelled by endpoint, a bounded set), auth runs before the body
    # is read (its 401 closes the connection, as the body is left unread), the limit before parsing.
    app.add_middleware(BodySizeLimit, max_bytes=config.max_body_bytes, timeout_s=config.body_timeout_s,
                       drain_bytes=config.drain_bytes)
    app.add_middleware(BearerAuth, api_keys=config.api_keys)
    endpoints = [route.path for routes in routers for route in routes.routes if isinstance(route, APIRoute)]
    app.add_middleware(RequestMetrics, metrics=metrics, endpoints=endpoints)
    return app


def _check_windows(name: str, embedder: Embedder, config: ServeConfig) -> None:
    """ValueError naming the model and both settings when its windows are not the config's."""
    for embedder_field, value, config_field, expected in (
            ("max_window_tokens", embedder.max_window_tokens, "max_sentence_tokens", config.max_sentence_tokens),
            ("window_context", embedder.window_context, "window_context", config.context_tokens)):
        if value != expected:
            raise ValueError(f"model {name!r} has {embedder_field}={value} but the ServeConfig's {config_field} is "
                             f"{expected}; load it with Embedder.load(..., max_window_tokens="
                             f"{config.max_sentence_tokens}, window_context={config.context_tokens})")


@router.api_route("/healthz", methods=["GET", "HEAD"])
async def healthz(service: ServiceDep) -> dict[str, object]:
    """Liveness and readiness for a load balancer: the models are loaded and their batchers running (HEAD too:
    some health checkers send it)."""
    return {"status": "ok", "models": list(service.models)}


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
async def prometheus(service: ServiceDep) -> Response:
    """Prometheus text format: requests, latency, batch sizes, queue depth."""
    return Response(service.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


@router.get("/", include_in_schema=False)
async def page() -> FileResponse:
    return FileResponse(STATIC_DIR / "index.html")


@router.get("/docs", include_in_schema=False)
async def docs() -> HTMLResponse:
    return get_swagger_ui_html(openapi_url="/openapi.json", title="elmo API",
                               swagger_js_url="/docs-assets/swagger-ui-bundle.js",
                               swagger_css_url="/docs-assets/swagger-ui.css",
                               swagger_favicon_url="/docs-assets/favicon-32x32.png")
