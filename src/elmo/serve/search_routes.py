"""The contextual-search endpoints: ``POST /v1/neighbors``, ``POST /v1/senses`` and ``GET /v1/indexes``.

The search is ``elmo.search``'s own, and so are its refusals (``SearchError``, answered by ``errors.py``): an
endpoint adds only what the service decides, which index, the request limits and the token budget.
"""

from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, Response

from elmo.search.neighbors import locate
from elmo.search.neighbors import neighbors as nearest_uses
from elmo.search.senses import Senses, senses
from elmo.serve.schemas import JsonRoute, NeighborsRequest, SensesRequest
from elmo.serve.search import senses_png
from elmo.serve.service import ServiceDep, negotiate

router = APIRouter(route_class=JsonRoute)


@router.post("/v1/neighbors")
async def neighbors(request: Request, body: NeighborsRequest, service: ServiceDep) -> dict[str, Any]:
    """The ``k`` indexed uses nearest to ``word`` as used in ``sentence`` (``elmo.search.neighbors``: the
    sentence is embedded by the index's model, through its batcher), and the ``k`` nearest words to it under
    layer 0, which has no context (``static``)."""
    served_index = service.index(body.index)
    index = served_index.index
    layer = index.layer(body.layer)
    model = service.models[served_index.model]
    tokens = await service.tokenize_one(model, body.sentence, "sentence")
    position = locate(tokens, body.word, body.occurrence)

    def search() -> dict[str, Any]:
        found = nearest_uses(index, tokens, body.word, body.k, layer, body.same_word, body.exact, body.occurrence)
        form = index.vocabulary_form(body.word)
        static = index.static_vectors.nearest(form, body.k) if form is not None else []
        return {"index": served_index.name, "layer": layer, "word": body.word, "tokens": tokens,
                "token_index": position, "neighbors": [neighbor.to_json() for neighbor in found],
                "static_word": form, "static": [{"word": word, "score": score} for word, score in static]}

    with service.hold(model, [tokens]):
        return await service.search(request, search)


@router.post("/v1/senses", response_model=None, responses={200: {"content": {
    "application/json": {}, "image/png": {}},
    "description": "JSON (clusters, their sizes and example uses, silhouette), or the sense map as PNG"}})
async def senses_endpoint(request: Request, body: SensesRequest, service: ServiceDep,
                          accept: Annotated[str | None, Header()] = None) -> Response:
    """The indexed uses of ``word`` clustered into senses (``elmo.search.senses``): each cluster's size and
    the use nearest its centre; with ``Accept: image/png``, the map ``elmo senses`` draws."""
    media_type = negotiate(accept, ("application/json", "image/png"))
    served_index = service.index(body.index)
    index = served_index.index
    layer = index.layer(body.layer)

    def cluster() -> Response:
        result = senses(index, body.word, body.clusters, layer)  # at most MAX_OCCURRENCES, a sample beyond
        if media_type == "image/png":
            return Response(senses_png(result), media_type="image/png")
        return JSONResponse(_senses_json(served_index.name, result))

    return await service.search(request, cluster)


@router.get("/v1/indexes")
async def list_indexes(service: ServiceDep) -> dict[str, Any]:
    """The served indexes: their layers and sizes, and the model that embeds their query sentences."""
    return {"indexes": [served_index.describe() for served_index in service.indexes.values()]}


def _senses_json(index_name: str, result: Senses) -> dict[str, Any]:
    return {"index": index_name, "word": result.word, "layer": result.layer, "occurrences": len(result.rows),
            "total_occurrences": result.total_occurrences,
            "silhouette": result.silhouette,
            "clusters": [{"size": size, "sentence": example.sentence, "token_index": example.token_index,
                          "token": example.token, "line": example.line}
                         for size, example in zip(result.sizes, result.examples, strict=True)]}
