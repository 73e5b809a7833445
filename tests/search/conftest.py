"""A corpus and an embedder whose vectors are known in closed form, so the right neighbours are known.

``ConstructedEmbedder`` is a ``LayerEmbedder`` (what search asks of a model): it splits at white space, and a
token's layer 0 is its word's one-hot vector, while layer ``j >= 1`` adds ``j`` times the sentence's topic
(sport or theatre, by the topic words it contains). So "play" in a sports sentence is nearest to the other
sports "play"s, and every score is a cosine computable by hand (``constructed_vector``).
"""

import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from elmo.bilm import BiLM
from elmo.search import LayerEmbedder

SPORT = {"baseball", "inning", "grounder", "pitcher"}
THEATRE = {"broadway", "stage", "actors", "curtain"}
TOPIC_DIMS = {"sport": 30, "theatre": 31}

SPORTS_LINES = [
    "the pitcher made a fine play in the ninth inning",
    "a spectacular play on the grounder ended the baseball game",
    "that play in the inning won the baseball title",
]
THEATRE_LINES = [
    "she wrote a play for broadway",
    "the actors rehearsed the play on the stage",
    "the curtain fell and the play ended on broadway",
]
FILLER_LINES = ["children like to play outside", "the weather is fine today", "", "a fine day for a walk"]


def topic_of(tokens: Sequence[str]) -> str | None:
    words = {token.casefold() for token in tokens}
    if words & SPORT:
        return "sport"
    if words & THEATRE:
        return "theatre"
    return None


def word_slot(word: str, dim: int) -> int:
    return zlib.crc32(word.casefold().encode()) % (dim - 2)  # the last two dimensions are the topics


def constructed_vector(tokens: Sequence[str], position: int, layer: int, dim: int) -> np.ndarray:
    vector = np.zeros(dim, np.float32)
    vector[word_slot(tokens[position], dim)] = 1.0
    topic = topic_of(tokens)
    if topic is not None and layer > 0:
        vector[TOPIC_DIMS[topic]] = float(layer)
    return vector


class ConstructedEmbedder:
    """``constructed_vector`` for every token; ``bilm`` (the fixture's) only gives its layer count and width. The
    ``fail_after + 1``-th call of ``embed`` raises KeyboardInterrupt, as a killed build stops."""

    tokenizer_name = "whitespace"
    fingerprint = "constructed vectors"  # the model's identity the index records: every one of these is alike
    max_window_tokens, window_context = 256, 64  # recorded; the vectors do not depend on them
    carries_state = False  # each sentence's vectors are its own

    def __init__(self, bilm: BiLM, fail_after: int | None = None) -> None:
        self.n_layers = bilm.config.n_output_layers
        self.dim = bilm.config.output_dim
        self.fail_after = fail_after
        self.runs = 0

    def tokenize(self, sentence: str | Sequence[str]) -> list[str]:
        return sentence.split() if isinstance(sentence, str) else list(sentence)

    def embed(self, sentences: Sequence[str | Sequence[str]], layers: str = "all",
              batch_size: int = 32) -> list[np.ndarray]:
        assert layers == "all"
        if self.fail_after is not None and self.runs >= self.fail_after:
            raise KeyboardInterrupt("simulated interruption")
        self.runs += 1
        return [np.array([[constructed_vector(tokens, position, layer, self.dim) for position in range(len(tokens))]
                          for layer in range(self.n_layers)], np.float32).reshape(self.n_layers, len(tokens), self.dim)
                for tokens in map(self.tokenize, sentences)]


@pytest.fixture
def constructed_embedder(fixture_bilm: BiLM) -> LayerEmbedder:
    return ConstructedEmbedder(fixture_bilm)


@pytest.fixture
def topic_corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    lines = [line for triple in zip(SPORTS_LINES, THEATRE_LINES, FILLER_LINES, strict=False) for line in triple]
    lines += FILLER_LINES[len(SPORTS_LINES):]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
