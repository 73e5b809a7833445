"""The embedding endpoints: ``POST /v1/embed`` (vectors, as JSON or .npy), ``POST /v1/tokenize`` (the tokens
alone), ``POST /v1/similarity`` (one word across sentences) and ``GET /v1/models``."""

import io
from typing import Annotated, Any

import numpy as np
import orjson
from fastapi import APIRouter, Header, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from starlette.types import Receive, Scope, Send

from elmo.layer_choice import layer_weights, mix_layers
from elmo.pooling import pool
from elmo.serve.batching import Hold
from elmo.serve.errors import ApiError
from elmo.serve.schemas import MAX_OCCURRENCES, EmbedRequest, JsonRoute, SimilarityRequest, TokenizeRequest
from elmo.serve.service import ServiceDep, negotiate
from elmo.similarity import average_linkage_groups, cosine_matrices, find_occurrences
from elmo.tokenizers import word_key

NPY_TYPES = ("application/x-npy", "application/octet-stream")
SLICE_BYTES = 1 << 18  # an answer is sent in slices this big, each once the client has taken most of the last

router = APIRouter(route_class=JsonRoute)


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


@router.post("/v1/embed", response_model=None, responses={200: {"content": {
    "application/json": {}, "application/x-npy": {}, "application/octet-stream": {}},
    "description": "JSON, or one float32 .npy of shape (N, [L+1,] T_max, 2P) zero-padded past each sentence's "
                   "length (lengths in X-Sentence-Lengths), or (N, [L+1,] 2P) with pooling=mean"}})
async def embed(request: Request, body: EmbedRequest, service: ServiceDep,
                accept: Annotated[str | None, Header()] = None) -> Response:
    """Vectors for each sentence: choose the layers, pool over tokens or not, JSON or .npy by Accept."""
    media_type = negotiate(accept, ("application/json", *NPY_TYPES))
    model = service.model(body.model)
    try:
        weights = layer_weights(body.layers, model.embedder.n_layers)
    except ValueError as error:
        raise ApiError(422, "invalid_request", str(error), "layers") from None
    token_lists = await service.tokenize(model, body.sentences)
    positions = None
    if media_type != "application/json" and body.pooling != "mean":
        positions = _padded_positions(token_lists, service.config.max_request_tokens)
    # given back by HeldResponse after the last byte, or below on failure
    held = service.hold(model, token_lists, positions)
    try:
        layers = await service.all_layers(request, model, token_lists)

        # On a thread: the event loop runs while numpy mixes. orjson holds the GIL while it writes, for a
        # time that --max-request-tokens bounds.
        def answer() -> tuple[bytes, dict[str, str]]:
            outputs = [_pool(mix_layers(vectors, weights), body.pooling) for vectors in layers]
            if weights is not None and not all(np.isfinite(output).all() for output in outputs):
                raise ApiError(422, "invalid_request", f"layers is {body.layers!r}: these mixing weights make the "
                               "vectors overflow float32; use smaller ones", "layers")
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


@router.post("/v1/tokenize")
async def tokenize(body: TokenizeRequest, service: ServiceDep) -> dict[str, Any]:
    """Each sentence's tokens as ``/v1/embed`` would embed them, without running the model: what the page asks
    as you type, so its word suggestions take no place in the batching queue or the token budget."""
    model = service.model(body.model)
    token_lists = await service.tokenize(model, body.sentences)
    return {"model": model.name, "tokenizer": model.embedder.tokenizer_name, "tokens": token_lists}


@router.post("/v1/similarity")
async def similarity(request: Request, body: SimilarityRequest, service: ServiceDep) -> dict[str, Any]:
    """Cosine similarity of every occurrence of ``word``, per layer, and the groups they fall into
    (average-linkage clustering into ``n_groups``): the same word in different senses should split."""
    model = service.model(body.model)
    if not word_key(body.word, body.match_case):
        raise ApiError(422, "invalid_request", f"{body.word!r} holds only spaces or invisible characters; "
                       "expected a word", "word")
    token_lists = await service.tokenize(model, body.sentences)
    occurrences = find_occurrences(token_lists, body.word, body.match_case)
    if not 2 <= len(occurrences) <= MAX_OCCURRENCES:
        raise ApiError(422, "invalid_request", f"{body.word!r} occurs {len(occurrences)} time(s); need 2 to "
                       f"{MAX_OCCURRENCES} occurrences to compare", "word")
    with service.hold(model, token_lists):
        layers = await service.all_layers(request, model, token_lists)
        vectors = np.stack([layers[s][:, p] for s, p in occurrences], axis=1)  # (L+1, N, 2P)
    matrices = cosine_matrices(vectors)
    n_groups = min(body.n_groups, len(occurrences))
    return {"model": model.name, "word": body.word, "n_layers": model.embedder.n_layers,
            "tokens": token_lists,
            "occurrences": [{"sentence": s, "position": p, "token": token_lists[s][p]} for s, p in occurrences],
            "similarity": matrices.tolist(),
            "groups": [average_linkage_groups(matrix, n_groups) for matrix in matrices]}


@router.get("/v1/models")
async def models(service: ServiceDep) -> dict[str, Any]:
    """The served models (each with its ``fingerprint``, ``elmo.fingerprint``: what a search index or a feature
    cache records of the model that made it) and the limits that apply to them."""
    config = service.config
    return {"models": [{"name": m.name, "n_layers": m.embedder.n_layers, "dim": m.embedder.dim,
                        "tokenizer": m.embedder.tokenizer_name, "device": str(m.embedder.device),
                        "fingerprint": m.fingerprint}
                       for m in service.models.values()],
            "limits": {"max_body_bytes": config.max_body_bytes, "max_sentences": config.max_sentences,
                       "max_sentence_tokens": config.max_sentence_tokens, "long_sentences": config.long_sentences,
                       "max_request_tokens": config.max_request_tokens, "max_queue": config.max_queue,
                       "max_queue_tokens": config.max_queue_tokens, "request_timeout_s": config.request_timeout_s,
                       "window_context": config.context_tokens, "limit_concurrency": config.limit_concurrency,
                       "header_timeout_s": config.header_timeout_s, "body_timeout_s": config.body_timeout_s,
                       "write_timeout_s": config.write_timeout_s, "keep_alive_s": config.keep_alive_s}}


def _pool(vectors: np.ndarray, pooling: str) -> np.ndarray:
    """``mean`` is ``elmo.pooling.pool``'s (summed in float64), so served means equal ``Embedder.encode``'s and
    a mix that fits float32 never overflows when its tokens are summed: ``(..., T, D)`` -> ``(..., D)``."""
    return pool(vectors, "mean") if pooling == "mean" else vectors


def _padded_positions(token_lists: list[list[str]], max_request_tokens: int) -> int:
    """Token positions of a .npy answer, every sentence zero-padded to the longest: its vectors' size, which
    the request's budget counts (a long sentence among short ones would otherwise pass the limit many times)."""
    longest = max(map(len, token_lists))
    positions = len(token_lists) * longest
    if positions > max_request_tokens:
        raise ApiError(413, "too_many_tokens", f"as .npy, {len(token_lists)} sentences padded to the longest "
                       f"({longest} tokens) make {positions} token positions; at most "
                       f"{max_request_tokens} per request (--max-request-tokens): send the long sentences in a "
                       "request of their own, or ask for JSON", "sentences")
    return positions


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
