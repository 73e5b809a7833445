"""What a request may hold: the JSON bodies of the POST endpoints (pydantic models, so FastAPI refuses a bad
field before any endpoint runs, and ``errors.py`` names it) and how a body is decoded."""

import json
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, Literal

from fastapi import Request
from fastapi.responses import Response
from fastapi.routing import APIRoute
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from elmo.layer_choice import LayerChoice, parse_layers

MAX_OCCURRENCES = 32  # /v1/similarity: the page's heat map stays small
MAX_NEIGHBORS = 100
MAX_SENSES = 32


def _unicode(text: str) -> str:
    """JSON's ``\\ud800`` escape decodes to a lone surrogate, which is no Unicode text and which no UTF-8 answer
    can carry: refused here, before any model time is spent on it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"holds a lone surrogate (\\u{ord(text[error.start]):04x} at character {error.start}); "
                         "send valid Unicode text") from None
    return text


def _layer_choice(value: str | int | list[float]) -> LayerChoice:
    """A layer choice as everywhere else (``elmo.layer_choice``): what fits the model is checked where it is
    known (the model's layer count, or the layers an index holds)."""
    return parse_layers(value)


Text = Annotated[str, AfterValidator(_unicode)]
Sentence = Text | list[Text]
Weight = Annotated[float, Field(allow_inf_nan=False)]
# Weights are floats first, so a NaN or 1e400 is refused naming its place (layers[0]).
Layers = Annotated[str | int | list[Weight], AfterValidator(_layer_choice)]


class TokenizeRequest(BaseModel):
    """Sentences are raw strings (split by the model's tokenizer) or token lists (used as given, each token cleaned
    as raw text is: composed, invisible formatting deleted)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: Text | None = Field(None, description="a served model's name; may be left out when only one is served")
    sentences: list[Sentence] = Field(min_length=1, examples=[["The bank of the river .", ["She", "sat"]]])


class EmbedRequest(TokenizeRequest):
    """Sentences are raw strings (split by the model's tokenizer) or token lists (used as given, each token
    cleaned), and which vectors of their tokens to answer."""

    layers: Layers = Field(
        "top", description="all: (L+1, T, 2P) per sentence; top, average, a layer index (-1 the top) or one mixing "
                           "weight per layer: (T, 2P)")
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
    layer: Layers | None = Field(None, description="an indexed layer (2, 'layer2', -1 or 'top', 'average'); "
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
    layer: Layers | None = None


REQUEST_FIELDS = frozenset().union(*(model.model_fields for model in (TokenizeRequest, EmbedRequest,
                                                                       SimilarityRequest, NeighborsRequest,
                                                                       SensesRequest)))


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
            except json.JSONDecodeError:
                raise
            except ValueError as error:  # an integer of more digits than Python converts
                raise json.JSONDecodeError(str(error), "", 0) from None
        return self._json


class JsonRoute(APIRoute):
    """The routers' route class: bodies read by ``_JsonRequest``."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            return await handler(_JsonRequest(request.scope, request.receive))

        return route

