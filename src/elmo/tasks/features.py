"""Every biLM layer of a data set, embedded once and stored in HDF5, so task models train on the stored layers.

With the biLM frozen (the paper's setting) its layers do not change during task training; embedding once
turns each epoch into a pass over stored arrays, which is what makes many task runs fit on two CPU cores.
Layout: one float16 dataset per sentence, named by its position (``"0"``, ``"1"``, ...), of shape
``(n_layers, n_words, dim)``; the file's attributes ``model_fingerprint`` (``elmo.fingerprint``: the model's
options and weights), how the embedder read them (``Embedder.reading``: ``embedder``, ``max_window_tokens``,
``window_context``) and ``sentences_sha256`` (every word of every sentence, in order, as the embedder reads it:
cleaned, ``Embedder.tokenize``) tell a stale cache from a usable one. float16 keeps 3 significant digits, far
below the noise a task model is trained with (dropout 0.5).
"""

import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path

import h5py
import numpy as np

from elmo.embedder import Embedder
from elmo.files import atomic_path

log = logging.getLogger(__name__)


def sentences_sha256(sentences: Sequence[Sequence[str]]) -> str:
    """The sha256 of every word of every sentence, in order (a sentence's boundaries included)."""
    digest = hashlib.sha256()
    for words in sentences:
        digest.update(json.dumps(list(words), ensure_ascii=False).encode("utf-8"))
    return digest.hexdigest()


def cache_layers(embedder: Embedder, sentences: Sequence[Sequence[str]], path: str | Path, batch_size: int = 64,
                 progress: bool = False) -> Path:
    """Embed ``sentences`` (lists of words) into ``path`` unless it already holds exactly these, embedded by this
    model (its fingerprint: options and weights) read the same way (``Embedder.reading``: windows, class); returns
    it. An embedder that carries state (``Embedder.carries_state``) always embeds them afresh: its vectors depend
    on the batch size and on the state it carries in from what it embedded before, which no file records."""
    path = Path(path)
    sentences = [embedder.tokenize(words) for words in sentences]  # the words as it reads them (cleaned)
    expected = {"model_fingerprint": embedder.fingerprint, **embedder.reading,
                "sentences_sha256": sentences_sha256(sentences)}
    if path.is_file() and not embedder.carries_state and _holds(path, expected):
        return path
    empty = [i for i, words in enumerate(sentences) if not words]
    if empty:
        raise ValueError(f"sentence {empty[0]} (of {len(sentences)}) has no words; the biLM needs at least one")
    with atomic_path(path) as temporary, h5py.File(temporary, "w") as out:
        for i, layers in enumerate(embedder.iter_embed(sentences, "all", batch_size, progress)):
            out.create_dataset(str(i), data=layers.astype(np.float16))
        out.attrs.update(expected)
        out.attrs["n_sentences"] = len(sentences)
        out.attrs["n_layers"] = embedder.n_layers
        out.attrs["dim"] = embedder.dim
    return path


def _holds(path: Path, expected: dict) -> bool:
    """Whether the cache file ``path`` records ``expected``; a file HDF5 cannot read (damaged, or not HDF5) holds
    nothing and is made again, with a warning naming it (it is a cache: nothing is lost)."""
    try:
        with h5py.File(path, "r") as existing:
            return all(existing.attrs.get(key) == value for key, value in expected.items())
    except OSError as error:  # h5py's error for a file it cannot open
        log.warning("%s cannot be read as a feature cache (%s); embedding its sentences again", path, error)
        return False


def load_layers(path: str | Path, n_sentences: int | None = None) -> list[np.ndarray]:
    """The stored arrays, float16 ``(n_layers, n_words, dim)``, in sentence order."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such feature file (make it with cache_layers)")
    try:
        with h5py.File(path, "r") as stored:
            count = int(stored.attrs.get("n_sentences", -1))
            if n_sentences is not None and count != n_sentences:
                raise ValueError(f"{path} holds {count} sentences; expected {n_sentences} (a cache of other data?)")
            return [stored[str(i)][()] for i in range(count)]
    except (OSError, KeyError) as error:  # what h5py raises for a damaged file or a missing sentence
        raise ValueError(f"{path}: the feature cache cannot be read ({error}); delete it, and it is made again") \
            from None
