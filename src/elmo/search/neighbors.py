"""The query side of contextual search: a word as used in a sentence -> one vector; hits -> what people read."""

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from elmo.similarity import find_occurrences

if TYPE_CHECKING:
    from elmo.embedder import Embedder
    from elmo.search.index import LayerSpec


@dataclass(frozen=True)
class Neighbor:
    """An indexed token near the query: its corpus line's text, its position among that line's tokens (as the
    model's tokenizer splits it), the token, and the cosine to the query."""

    sentence: str
    token_index: int
    token: str
    score: float
    line: int = field(compare=False)
    tokens: list[str] = field(compare=False, repr=False)

    def to_json(self) -> dict:
        return {key: value for key, value in asdict(self).items() if key in ("sentence", "token_index", "token",
                                                                              "score")}

    def highlighted(self, start: str = "[", end: str = "]") -> str:
        """The sentence's tokens with the matched one between ``start`` and ``end``."""
        return " ".join(f"{start}{token}{end}" if i == self.token_index else token
                        for i, token in enumerate(self.tokens))


def query_vector(embedder: "Embedder", sentence: str | Sequence[str], word: str, layer: "LayerSpec",
                 occurrence: int = 0) -> tuple[list[str], int, np.ndarray]:
    """The sentence's tokens, the position of ``word`` in them (its ``occurrence``-th use, ignoring case) and its
    vector at ``layer`` (a number or ``"average"``), ``(dim,)``. ValueError if the word is not there."""
    tokens = embedder.tokenize(sentence)
    positions = [position for _, position in find_occurrences([tokens], word, match_case=False)]
    if not positions:
        raise ValueError(f"{word!r} is not a token of the sentence {' '.join(tokens)!r}")
    if not 0 <= occurrence < len(positions):
        raise ValueError(f"{word!r} occurs {len(positions)} time(s) in the sentence; occurrence {occurrence} "
                         f"is out of range")
    all_layers = embedder.embed([tokens], "all")[0]
    position = positions[occurrence]
    vector = all_layers[:, position].mean(axis=0) if layer == "average" else all_layers[layer, position]
    return tokens, position, vector


def format_table(title: str, rows: Sequence[tuple[str, float]]) -> list[str]:
    """A titled list of ``score  text`` lines."""
    return [title, *(f"  {score:6.3f}  {text}" for text, score in rows)]
