"""What contextual search asks of a model, as a Protocol.

``elmo.Embedder`` satisfies ``LayerEmbedder`` as it is; so do the service's embedder that runs queries through
its batcher (``elmo.serve.search``) and the tests' embedder with vectors in closed form. Search never reaches
past these members.
"""

from collections.abc import Sequence
from typing import Literal, Protocol

import numpy as np

from elmo.search.errors import SearchError


class LayerEmbedder(Protocol):
    """Sentences -> every layer of every token. ``fingerprint`` (``elmo.fingerprint``: the model's options and
    weights) is recorded in the index, and an index refuses a query model with another; ``tokenizer_name`` is
    recorded too, so queries are split as the corpus was."""

    tokenizer_name: str
    # How a sentence longer than a window is cut (``elmo.embedder``): its tokens' vectors depend on both, so the
    # index records them and its queries must be cut alike.
    max_window_tokens: int
    window_context: int

    @property
    def carries_state(self) -> bool:
        """True where a sentence's vectors depend on the lines embedded before it (``Embedder.carries_state``)."""
        ...

    @property
    def fingerprint(self) -> str: ...

    @property
    def n_layers(self) -> int: ...

    @property
    def dim(self) -> int: ...

    def tokenize(self, sentence: str | Sequence[str]) -> list[str]:
        """A raw string split by the tokenizer; a token list as given, each token cleaned (``clean_token``)."""
        ...

    def embed(self, sentences: Sequence[str | Sequence[str]], layers: Literal["all"] = "all",
              batch_size: int = 32) -> list[np.ndarray]:
        """Each sentence's layers, ``(n_layers, T, dim)`` float32, in order."""
        ...


def window_of(embedder: LayerEmbedder) -> dict[str, int]:
    """How ``embedder`` cuts long sentences, as an index's ``meta.json`` records it."""
    return {"max_window_tokens": embedder.max_window_tokens, "window_context": embedder.window_context}


def check_stateless(embedder: LayerEmbedder, field: str) -> None:
    """SearchError (``field``) for an embedder that carries LSTM state from batch to batch (``StatefulEmbedder``):
    a corpus token's vector would depend on the lines embedded before it in its batch row, which a query sentence
    embedded on its own never reproduces, so a line's own copy would score below other lines' uses."""
    if embedder.carries_state:
        raise SearchError(f"{field} ({type(embedder).__name__}) carries LSTM state from batch to batch: a corpus "
                          "token's vector would depend on the lines before it, and no query sentence is embedded "
                          "alike; use elmo.Embedder, where every sentence starts from a zero state", field)
