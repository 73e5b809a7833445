"""What contextual search asks of a model, as a Protocol, and the fingerprint an index keeps of it.

``elmo.Embedder`` satisfies ``LayerEmbedder`` as it is; so do the service's embedder that runs queries through
its batcher (``elmo.serve.search``) and the tests' embedder with vectors in closed form. Search never reaches
past these members.
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from elmo.bilm import BiLM


class LayerEmbedder(Protocol):
    """Sentences -> every layer of every token. ``bilm`` is read only for its configuration (``model_config``);
    ``tokenizer_name`` is recorded in the index, so queries are split as the corpus was."""

    tokenizer_name: str
    bilm: "BiLM"

    @property
    def n_layers(self) -> int: ...

    @property
    def dim(self) -> int: ...

    def tokenize(self, sentence: str | Sequence[str]) -> list[str]:
        """A raw string split by the tokenizer; a token list as given."""
        ...

    def embed(self, sentences: Sequence[str | Sequence[str]], layers: str = "all",
              batch_size: int = 32) -> list[np.ndarray]:
        """With ``layers="all"``: each sentence's layers, ``(n_layers, T, dim)`` float32, in order."""
        ...


def model_config(embedder: LayerEmbedder) -> str:
    """The model's configuration as the index records it at build time and checks it against a query model."""
    return repr(embedder.bilm.config)
