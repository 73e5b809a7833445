"""The on-disk format of an index directory, named once for the writer (``build``) and the reader (``index``).

- ``meta.json``: the format version, the model (its name and ``elmo.fingerprint``), tokenizer, windows, layers and
  sizes, and how the ANN index was made; ``model`` is a model directory's absolute path or, with
  ``model_shipped`` true, a shipped model's name (``model_source``);
- ``sentences.txt`` + ``sentence_offsets.i8``: each corpus line as the model read it (``clean_text``: the text
  its tokens were split from), and the byte offset of each line (``n_sentences + 1`` int64), so a hit's sentence
  is one seek away; indexes built before the lines were stored cleaned hold them as read, which the reader
  cleans (``clean_text`` changes no clean text, so both read alike);
- ``tokens.bin``: one ``TOKEN_DTYPE`` record per indexed token: its sentence, its position in the model
  tokenizer's tokens of that sentence, and its word id;
- ``vectors-<layer>.f16``: ``(n_indexed, dim)`` unit vectors in float16, read through a memory map, so the
  corpus may be larger than RAM;
- ``ann-<layer>.faiss``: faiss's index over those vectors (``elmo.search.ann``);
- ``vocab.txt``, ``counts.npy``, ``layer0.f16``: every word type of the corpus (one a line), how often it
  occurs, and its context-free (layer 0) vector in float16, for the static contrast;
- ``progress.json``: only while the build runs, in ``OUT.partial`` (``build.py``); deleted once ``meta.json`` is
  written there, before the index is published.
"""

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

from elmo.layer_choice import StoredLayer

FORMAT_VERSION = 2  # 2: the model's fingerprint (options and weights) and n_layers, not its configuration's repr
META = "meta.json"
PROGRESS = "progress.json"
SENTENCES = "sentences.txt"
SENTENCE_OFFSETS = "sentence_offsets.i8"
TOKENS = "tokens.bin"
VOCAB = "vocab.txt"
COUNTS = "counts.npy"
LAYER0 = "layer0.f16"

OFFSET_DTYPE = np.dtype("<i8")
VECTOR_DTYPE = np.dtype("<f2")
TOKEN_DTYPE = np.dtype([("sentence", "<i8"), ("position", "<i4"), ("word", "<i4")])

# A build's settings (what a resumed build must share) and the meta.json key each is kept under in the index:
# meta.json names the corpus's sha256 and the model's fingerprint more fully, beside the model's name.
SETTINGS_IN_META = {"corpus": "corpus", "sha256": "corpus_sha256", "model": "fingerprint", "tokenizer": "tokenizer",
                    "window": "window", "layers": "layers", "words_only": "words_only"}
INDEX_FILES = frozenset({META, SENTENCES, SENTENCE_OFFSETS, TOKENS, VOCAB, COUNTS, LAYER0})


class MetaField(NamedTuple):
    """What a ``meta.json`` key must hold for the reader: ``holds`` tells, ``expected`` says it in words."""

    holds: Callable[[object], bool]
    expected: str


def _whole(value: object, least: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


# The keys of meta.json the reader uses (after ``format``), a dot for a key inside an object. "window" may be left
# out (indexes built before it was recorded: ``ContextIndex.window``), the keys inside it only with it; every
# other is required.
META_FIELDS = {
    "model": MetaField(lambda value: value is None or isinstance(value, str), "a model directory or name, or null"),
    "fingerprint": MetaField(lambda value: isinstance(value, str), "the model's fingerprint, a string"),
    "tokenizer": MetaField(lambda value: isinstance(value, str), "a tokenizer's name"),
    "layers": MetaField(lambda value: isinstance(value, list) and bool(value)
                        and all(isinstance(name, str) and name for name in value), "a non-empty list of layer names"),
    "n_layers": MetaField(lambda value: _whole(value, 1), "a whole number >= 1"),
    "dim": MetaField(lambda value: _whole(value, 1), "a whole number >= 1"),
    "n_sentences": MetaField(_whole, "a whole number >= 0"),
    "n_tokens": MetaField(_whole, "a whole number >= 0"),
    "n_indexed": MetaField(_whole, "a whole number >= 0"),
    "n_words": MetaField(_whole, "a whole number >= 0"),
    "window": MetaField(lambda value: isinstance(value, dict), "an object"),
    "window.max_window_tokens": MetaField(lambda value: _whole(value, 1), "a whole number >= 1"),
    "window.window_context": MetaField(_whole, "a whole number >= 0"),
    "ann": MetaField(lambda value: isinstance(value, dict), "an object"),
    "ann.factories": MetaField(lambda value: isinstance(value, dict), "an object"),
    "ann.candidates": MetaField(lambda value: _whole(value, 1), "a whole number >= 1"),
    # one above the index's lists is searched as all of them (``ann.read_ann``)
    "ann.nprobe": MetaField(lambda value: _whole(value, 1), "the number of inverted lists searched per query, a "
                            "whole number >= 1 (set it there)"),
}
OPTIONAL_META = frozenset({"window"})


def file_sizes(meta: dict) -> dict[str, int]:
    """The byte length of each file of fixed-size records, as ``meta.json``'s counts (checked: ``META_FIELDS``) make
    it: what the reader maps."""
    vectors_bytes = meta["n_indexed"] * meta["dim"] * VECTOR_DTYPE.itemsize
    return {TOKENS: meta["n_indexed"] * TOKEN_DTYPE.itemsize,
            SENTENCE_OFFSETS: (meta["n_sentences"] + 1) * OFFSET_DTYPE.itemsize,
            LAYER0: meta["n_words"] * meta["dim"] * VECTOR_DTYPE.itemsize,
            **{vectors_file(layer): vectors_bytes for layer in meta["layers"]}}


def is_index_file(name: str) -> bool:
    """Whether a finished index directory may hold a file of this name (its per-layer files included)."""
    return name in INDEX_FILES or (name.startswith("vectors-") and name.endswith(".f16")) or \
        (name.startswith("ann-") and name.endswith(".faiss"))


def vectors_file(layer: str) -> str:
    """The file of a stored layer's token vectors (``layer``: a name from ``layer_name``)."""
    return f"vectors-{layer}.f16"


def ann_file(layer: str) -> str:
    """The file of a stored layer's ANN index."""
    return f"ann-{layer}.faiss"


def partial_directory(out: Path) -> Path:
    """Where the index for ``out`` is built until it is complete."""
    return out.with_name(out.name + ".partial")


def read_vocabulary(directory: Path) -> list[str]:
    """The word types of ``directory``'s ``vocab.txt`` in id order."""
    return vocabulary_of((directory / VOCAB).read_bytes())


def vocabulary_of(vocab_file: bytes) -> list[str]:
    """The word types of a ``vocab.txt``'s bytes in id order (each line ends in a newline, so the last split is
    empty)."""
    return vocab_file.decode("utf-8").split("\n")[:-1]


def layer_name(layer: StoredLayer) -> str:
    """How a stored layer is named in ``meta.json`` and in file names: ``layer2``, ``average``."""
    return "average" if layer == "average" else f"layer{layer}"


def model_source(model: str, shipped: bool) -> str:
    """What ``Embedder.load`` loads for ``meta.json``'s ``model`` and ``model_shipped``: a shipped model's own
    directory, not whatever directory of that name the working directory holds; else ``model`` as it is."""
    from elmo.model_dir import shipped_models_root

    return str(shipped_models_root() / model) if shipped else model
