"""Polysemy sets and two measures of how well a model's layers tell a word's senses apart.

The sets (``en.jsonl``, ``zh.jsonl`` next to this file) hold ambiguous words in sentences written for this
purpose (not taken from any corpus), one record per sentence. None of them is a line of the ``en-large`` /
``zh-large`` corpora's text (checked 2026-12-05, when two short English ones that also occur there, "My watch is
five minutes fast." and "What kind of music do you like?", were replaced by new ones)::

    {"word": "bank", "sense": "river", "text": "...", "tokens": [...], "index": 5}

``tokens`` is ``text`` split the way the shipped model of that language splits it (``english``:
sacremoses; ``jieba``), stored so that a score does not move with a tokenizer's version; ``tokens[index]``
is the word, which occurs once in the sentence. English targets are never capitalized, so every
occurrence of a word is the same string and gets the same context-free vector.

The measures, for one layer, over all occurrences of one word:

- **triplet rate**: for every anchor occurrence, every other occurrence of the same sense and every
  occurrence of another sense, is ``cos(anchor, same) > cos(anchor, other)``? Ties fail, so a static
  vector (every occurrence alike, as layer 0 is) scores 0. Pooled over all triples of all words.
- **nearest-neighbour agreement**: for every occurrence, is its nearest other occurrence of the word
  of the same sense? The nearest must be strictly nearer than every occurrence of another sense, so a
  static vector scores 0 here too. Pooled over all occurrences of all words.
"""

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

import numpy as np
import torch

from elmo.bilm import BiLM
from elmo.config import BiLMConfig
from elmo.embedder import Embedder
from elmo.model_dir import ModelDir

LANGUAGES = ("en", "zh")

# word -> sense -> (occurrences, dim): one layer's vectors of each word's occurrences, grouped by sense
VectorsBySense = Mapping[str, Mapping[str, np.ndarray]]


@dataclass(frozen=True)
class SenseSentence:
    word: str
    sense: str
    text: str
    tokens: tuple[str, ...]
    index: int  # tokens[index] == word

    def __post_init__(self) -> None:
        """Every measure reads the word's vector at ``index``: a sentence whose token there is another word would
        be scored as if it were the word, silently."""
        if not 0 <= self.index < len(self.tokens) or self.tokens[self.index] != self.word:
            found = repr(self.tokens[self.index]) if 0 <= self.index < len(self.tokens) else "past the tokens"
            raise ValueError(f"{self.text!r}: token {self.index} is {found}, not the word {self.word!r}")


def load_sentences(language: str) -> list[SenseSentence]:
    """The polysemy set of ``language`` (``en`` or ``zh``), grouped by word, then by sense."""
    if language not in LANGUAGES:
        raise ValueError(f"no polysemy set for language {language!r}; expected one of {LANGUAGES}")
    path = resources.files("elmo.polysemy") / f"{language}.jsonl"
    sentences = []
    for line_number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        record = json.loads(line)
        try:
            sentences.append(SenseSentence(record["word"], record["sense"], record["text"], tuple(record["tokens"]),
                                           record["index"]))
        except ValueError as error:
            raise ValueError(f"{language}.jsonl line {line_number}: {error}") from None
    return sentences


def _cosines(vectors: np.ndarray) -> np.ndarray:
    """``(N, D)`` -> ``(N, N)`` cosine similarity in float64.

    Elementwise products summed along D (numpy's fixed summation order) rather than a matrix product: two
    bit-identical vectors then get bit-identical cosines with every third vector, so a static vector ties
    exactly, whatever blocking a BLAS kernel would use. One row at a time: the whole ``(N, N, D)`` product
    at once would take N * N * D * 8 bytes (33 GB for 2,000 uses of 1,024 dimensions).
    """
    vectors = np.asarray(vectors, dtype=np.float64)
    unit = vectors / np.sqrt((vectors * vectors).sum(axis=-1, keepdims=True))  # no zero rows: _stack refuses them
    return np.stack([(row * unit).sum(axis=-1) for row in unit]) if len(unit) else np.zeros((0, 0))


def _stack(senses: Mapping[str, np.ndarray], word: str | None) -> tuple[np.ndarray, np.ndarray]:
    """One word's vectors ``(N, D)`` and each one's sense number ``(N,)``. ValueError, naming the word and
    sense, for an array that is not ``(occurrences, dim)`` (a single ``(dim,)`` vector would be read as dim
    one-number uses) or holds NaN or infinity (which would tie, scoring like a static layer, not fail)."""
    at = f"word {word!r} sense" if word is not None else "sense"
    arrays = [np.asarray(vectors) for vectors in senses.values()]
    for sense, vectors in zip(senses, arrays, strict=True):
        if vectors.ndim != 2:
            raise ValueError(f"{at} {sense!r}: vectors of shape {vectors.shape}; expected (occurrences, dim)")
        if not np.isfinite(vectors).all():
            raise ValueError(f"{at} {sense!r}: vectors hold NaN or infinite values")
        if len(vectors) and not (vectors != 0).any(axis=-1).all():
            # a zero vector has no cosine; read as 0 it would beat every negative cosine and pass triples
            raise ValueError(f"{at} {sense!r}: a vector is all zeros (no cosine to compare)")
    labels = np.repeat(np.arange(len(arrays)), [len(vectors) for vectors in arrays])
    return np.concatenate(arrays), labels


def _anchors(senses: Mapping[str, np.ndarray], word: str | None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """For each occurrence of one word: its cosines to the other occurrences of its sense, and to those of the
    other senses."""
    vectors, labels = _stack(senses, word)
    cosines = _cosines(vectors)
    for anchor in range(len(labels)):
        same = (labels == labels[anchor]) & (np.arange(len(labels)) != anchor)
        yield cosines[anchor, same], cosines[anchor, labels != labels[anchor]]


def triplet_counts(senses: Mapping[str, np.ndarray], word: str | None = None) -> tuple[int, int]:
    """One word (sense -> ``(occurrences, dim)``): (triples where the same sense is strictly nearer, triples).
    ValueError, naming ``word`` and the sense, for vectors that are not 2-D or not finite."""
    passed = total = 0
    for same, other in _anchors(senses, word):
        passed += int((same[:, None] > other[None, :]).sum())
        total += len(same) * len(other)
    return passed, total


def nn_counts(senses: Mapping[str, np.ndarray], word: str | None = None) -> tuple[int, int]:
    """One word: (occurrences whose nearest other occurrence is of their sense, strictly; occurrences that
    have another occurrence of their sense and one of another sense)."""
    passed = total = 0
    for same, other in _anchors(senses, word):
        if len(same) and len(other):
            total += 1
            passed += int(same.max() > other.max())
    return passed, total


def _pooled_rate(counts: list[tuple[int, int]], what: str) -> float:
    passed = sum(p for p, _ in counts)
    total = sum(t for _, t in counts)
    if total == 0:
        raise ValueError(f"no {what}: every word needs two senses, one of them with two occurrences")
    return passed / total


def triplet_rate(vectors_by_sense: VectorsBySense) -> float:
    """Share of all anchor / same-sense / other-sense triples, over all words, where the anchor is strictly
    closer (cosine) to the same-sense occurrence. ``vectors_by_sense``: word -> sense -> ``(n, dim)``."""
    return _pooled_rate([triplet_counts(senses, word) for word, senses in vectors_by_sense.items()], "triples")


def nn_agreement(vectors_by_sense: VectorsBySense) -> float:
    """Share of all occurrences, over all words, whose nearest other occurrence of the word is of the same
    sense (strictly nearer than any occurrence of another sense)."""
    return _pooled_rate([nn_counts(senses, word) for word, senses in vectors_by_sense.items()], "occurrences")


@dataclass(frozen=True)
class WordScores:
    word: str
    senses: tuple[str, ...]
    n_sentences: int
    triplets: tuple[int, ...]  # per layer: triples passed
    n_triplets: int
    nn_agreements: tuple[int, ...]  # per layer: occurrences whose nearest neighbour has their sense
    n_nn: int

    @property
    def triplet_rate(self) -> list[float]:
        return [passed / self.n_triplets for passed in self.triplets]

    @property
    def nn_agreement(self) -> list[float]:
        return [passed / self.n_nn for passed in self.nn_agreements]


@dataclass(frozen=True)
class PolysemyScores:
    language: str
    words: tuple[WordScores, ...]

    @property
    def n_layers(self) -> int:
        return len(self.words[0].triplets)

    @property
    def triplet_rate(self) -> list[float]:
        """Per layer, pooled over all triples of all words."""
        total = sum(word.n_triplets for word in self.words)
        return [sum(word.triplets[k] for word in self.words) / total for k in range(self.n_layers)]

    @property
    def nn_agreement(self) -> list[float]:
        """Per layer, pooled over all occurrences of all words."""
        total = sum(word.n_nn for word in self.words)
        return [sum(word.nn_agreements[k] for word in self.words) / total for k in range(self.n_layers)]


def word_vectors(embedder: Embedder, sentences: Sequence[SenseSentence], batch_size: int = 32) -> np.ndarray:
    """``(n_layers, n_sentences, dim)``: each sentence's target word, every layer. Sentences go in as their
    stored tokens, so the embedder's tokenizer plays no part; except that a model reading characters
    (tokenizer ``chars``, as Chinese can be trained) gets the stored tokens' characters, and a word's vector is
    the mean of its characters' vectors."""
    spans = []
    token_lists: list[list[str]] = []
    for sentence in sentences:
        if embedder.tokenizer_name == "chars":
            start = sum(len(token) for token in sentence.tokens[: sentence.index])
            spans.append((start, start + len(sentence.tokens[sentence.index])))
            token_lists.append([character for token in sentence.tokens for character in token])
        else:
            spans.append((sentence.index, sentence.index + 1))
            token_lists.append(list(sentence.tokens))
    layers = embedder.embed(token_lists, "all", batch_size)
    return np.stack([all_layers[:, start:end].mean(axis=1)
                     for all_layers, (start, end) in zip(layers, spans, strict=True)], axis=1)


def vectors_by_sense(sentences: Sequence[SenseSentence], vectors: np.ndarray) -> VectorsBySense:
    """One layer's ``(n_sentences, dim)`` vectors, grouped word -> sense -> ``(n, dim)``."""
    grouped: dict[str, dict[str, list[int]]] = {}
    for row, sentence in enumerate(sentences):
        grouped.setdefault(sentence.word, {}).setdefault(sentence.sense, []).append(row)
    return {word: {sense: vectors[rows] for sense, rows in senses.items()} for word, senses in grouped.items()}


def evaluate_model(embedder: Embedder, language: str, batch_size: int = 32) -> PolysemyScores:
    """Triplet rate and nearest-neighbour agreement of every layer of ``embedder`` on the ``language`` set,
    pooled (``.triplet_rate``, ``.nn_agreement``: one number per layer) and per word (``.words``)."""
    sentences = load_sentences(language)
    vectors = word_vectors(embedder, sentences, batch_size)
    by_layer = [vectors_by_sense(sentences, layer) for layer in vectors]
    words = []
    for word in by_layer[0]:
        triplets = [triplet_counts(layer[word], word) for layer in by_layer]
        nns = [nn_counts(layer[word], word) for layer in by_layer]
        words.append(WordScores(
            word=word,
            senses=tuple(by_layer[0][word]),
            n_sentences=sum(len(v) for v in by_layer[0][word].values()),
            triplets=tuple(passed for passed, _ in triplets),
            n_triplets=triplets[0][1],
            nn_agreements=tuple(passed for passed, _ in nns),
            n_nn=nns[0][1],
        ))
    return PolysemyScores(language, tuple(words))


def random_weights_embedder(model: str, seed: int = 0, **options) -> Embedder:
    """An embedder of the same shape and tokenizer as ``model`` with freshly initialized weights (each PyTorch
    module's default initialization, seeded; not the trainer's bilm-tf one): the floor a trained model should
    clear."""
    model_dir = ModelDir.find(model)
    torch.manual_seed(seed)
    return Embedder(BiLM(BiLMConfig.load(model_dir.options_file)), tokenizer=model_dir.tokenizer, **options)
