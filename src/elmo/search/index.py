"""Reading an index directory that ``build_index`` wrote (``layout.py``): memory-mapped token records and
vectors, the ANN index of each layer (loaded on first use), the corpus vocabulary and its layer-0 vectors.

Every file is opened when the index loads, from one version of the directory, and read through those handles:
an index rebuilt in place (``elmo index --out`` the same directory, published by swapping directories) leaves
a loaded index, or a server holding it, answering from the version it loaded, not the new version's lines at the
old one's offsets. Load it again to read the new one.

``elmo.search.neighbors`` and ``elmo.search.senses`` query it.
"""

import io
import json
import mmap
import os
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from elmo.layer_choice import LayerChoice, LayerChoiceError, stored_layer
from elmo.search import layout
from elmo.search.ann import CHUNK_ROWS, ann_search, check_k, exact_search, read_ann, unit_rows
from elmo.search.errors import SearchError
from elmo.search.layout import layer_name
from elmo.search.model import LayerEmbedder, check_stateless, window_of
from elmo.tokenizers import clean_text, get_tokenizer, word_key
from elmo.windows import EARLIER_DEFAULTS

if TYPE_CHECKING:
    import faiss

    from elmo.static_vectors import StaticVectors


def query_key(word: str) -> str:
    """``word_key`` of a word searched for; SearchError (field ``word``) for one of only spaces or invisible
    characters: its empty key matches no word, only a token as blank as itself (which a token list may hold), so
    it would be searched as if it were one."""
    key = word_key(word)
    if not key:
        raise SearchError(f"{word!r} holds only spaces or invisible characters; expected a word", "word")
    return key


@dataclass(frozen=True)
class Occurrence:
    """One indexed token: the corpus line it is in (0-based), that line's text as the model read it (cleaned), its
    tokens and its position."""

    row: int
    line: int
    sentence: str
    tokens: list[str]
    token_index: int

    @property
    def token(self) -> str:
        return self.tokens[self.token_index]

    def highlighted(self, start: str = "[", end: str = "]") -> str:
        return highlighted(self.tokens, self.token_index, start, end)


def highlighted(tokens: list[str], token_index: int, start: str = "[", end: str = "]") -> str:
    """The tokens joined by spaces with the one at ``token_index`` between ``start`` and ``end``: which use of a
    word is meant, where a line has two."""
    return " ".join(f"{start}{token}{end}" if i == token_index else token for i, token in enumerate(tokens))


def _read_meta(meta_file: Path, fd: int) -> dict:
    """``meta.json`` of an index (open as ``fd``), refused (SearchError, field ``directory``) naming it and the
    key at fault unless it is of this format and holds every key the reader uses as ``layout.META_FIELDS``
    describes: a damaged one would fail later as a bare KeyError or AttributeError."""
    try:
        meta = json.loads(_read_whole(fd).decode("utf-8"))
    except ValueError as error:  # not JSON, or not UTF-8
        raise SearchError(f"{meta_file} is not JSON ({error}); the index is damaged: build it again",
                          "directory") from None
    if not isinstance(meta, dict):
        raise SearchError(f"{meta_file} holds a JSON {type(meta).__name__}, not an object; the index is damaged: "
                          "build it again", "directory")
    if meta.get("format") != layout.FORMAT_VERSION:
        raise SearchError(f"{meta_file}: index format {meta.get('format')!r}; this version reads "
                          f"{layout.FORMAT_VERSION} (build the index again with this version)", "directory")
    missing = []
    for key, field in layout.META_FIELDS.items():
        *parents, name = key.split(".")
        if any(parent not in meta for parent in parents):
            continue  # an object left out: named missing already, or one that may be left out
        holder = meta
        for parent in parents:  # checked above as an object
            holder = holder[parent]
        if name not in holder:
            if key not in layout.OPTIONAL_META:
                missing.append(key)
        elif not field.holds(holder[name]):
            raise SearchError(f"{meta_file}: {key} is {holder[name]!r}; expected {field.expected}", "directory")
    if missing:
        raise SearchError(f"{meta_file} lacks {', '.join(missing)}; the index is damaged: build it again",
                          "directory")
    return meta


def _check_file_sizes(directory: Path, meta: dict, files: dict[str, int]) -> None:
    """SearchError (field ``directory``) naming a file of fixed-size records that is not the length ``meta.json``'s
    counts make it (``layout.file_sizes``), before it is mapped: a memory map of a file cut short fails as "mmap
    length is greater than file size", naming no file."""
    for name, expected in layout.file_sizes(meta).items():
        path = directory / name
        size = os.fstat(files[name]).st_size
        if size != expected:
            raise SearchError(f"{path} is {size:,} bytes where {layout.META} makes it {expected:,}: the index is "
                              "damaged (a copy cut short?); build it again", "directory")


def _open_files(directory: Path) -> tuple[dict, dict[str, int]]:
    """``meta.json`` and every file of the index (its per-layer files those ``meta.json`` names), opened from one
    version of the directory: through one handle on the directory, which is then checked to be still the one at
    ``directory`` (a rebuild publishes by swapping directories, then deletes the old one). ``_Swapped`` when it was
    swapped meanwhile; SearchError (field ``directory``) naming a file missing from the version opened."""
    directory_fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    files: dict[str, int] = {}  # name -> file descriptor

    def still_there() -> bool:
        now, opened = os.stat(directory), os.fstat(directory_fd)
        return (now.st_dev, now.st_ino) == (opened.st_dev, opened.st_ino)

    def open_file(name: str) -> int:
        try:
            files[name] = os.open(name, os.O_RDONLY, dir_fd=directory_fd)
        except FileNotFoundError:
            if not still_there():
                raise _Swapped from None
            raise SearchError(f"{directory / name} is missing; the index is damaged: build it again",
                              "directory") from None
        return files[name]

    try:
        meta = _read_meta(directory / layout.META, open_file(layout.META))
        for name in (*sorted(layout.INDEX_FILES - {layout.META}),
                     *(file(layer) for layer in meta["layers"] for file in (layout.vectors_file, layout.ann_file))):
            open_file(name)
        if not still_there():
            raise _Swapped
    except BaseException:
        _close_files(files)
        raise
    finally:
        os.close(directory_fd)
    return meta, files


def _close_files(files: dict[str, int]) -> None:
    for fd in files.values():
        os.close(fd)
    files.clear()


def _read_whole(fd: int) -> bytes:
    """A file's bytes, read in parts: one ``pread`` returns at most about 2 GB on Linux."""
    size = os.fstat(fd).st_size
    parts, done = [], 0
    while done < size:
        part = os.pread(fd, min(size - done, _LARGEST_READ), done)
        if not part:
            raise SearchError(f"an index file was cut short while it was read ({done:,} of {size:,} bytes)",
                              "directory")
        parts.append(part)
        done += len(part)
    return b"".join(parts)


_LARGEST_READ = 1 << 30


def _mapped(fd: int, dtype: np.dtype) -> np.ndarray:
    """A read-only array over a file's whole length, memory-mapped (the map holds the file open itself)."""
    if os.fstat(fd).st_size == 0:  # no map of an empty file
        return np.zeros(0, dtype)
    return np.frombuffer(mmap.mmap(fd, 0, access=mmap.ACCESS_READ), dtype)


_LOAD_ATTEMPTS = 3  # rebuilds published one after another while one load opens the files


class _Swapped(Exception):
    """The index directory was replaced (a rebuild published) while its files were being opened."""


class ContextIndex:
    """An index directory written by ``build_index``, memory-mapped; the ANN indexes load on first use. Its files
    are those of the version of the directory it loaded (``_open_files``), open until the index is collected."""

    def __init__(self, directory: Path, meta: dict, files: dict[str, int],
                 embedder: LayerEmbedder | None = None) -> None:
        self.directory = directory
        self.meta = meta
        self._files = files  # name -> file descriptor, closed with the index
        weakref.finalize(self, _close_files, files)
        self.layers: list[str] = meta["layers"]
        self.dim: int = meta["dim"]
        self.n_layers: int = meta["n_layers"]  # the model's, so "top" and -1 name a layer
        self.tokenize = get_tokenizer(meta["tokenizer"])
        self.tokens = _mapped(files[layout.TOKENS], layout.TOKEN_DTYPE)
        self.sentence_offsets = _mapped(files[layout.SENTENCE_OFFSETS], layout.OFFSET_DTYPE)
        self.words: list[str] = layout.vocabulary_of(_read_whole(files[layout.VOCAB]))
        self.counts = np.load(io.BytesIO(_read_whole(files[layout.COUNTS])))
        self._embedder = embedder
        self._embedder_checked = False
        self._vectors: dict[str, np.ndarray] = {}
        self._ann: dict[str, faiss.Index] = {}
        self._static: StaticVectors | None = None

    @classmethod
    def load(cls, directory: str | Path, embedder: LayerEmbedder | None = None) -> "ContextIndex":
        """``embedder``: the model that answers sentence queries (default: the one the index was built with)."""
        directory = Path(directory)
        meta_file = directory / layout.META
        partial = layout.partial_directory(directory)
        hint = f"; {partial} is an unfinished build (elmo index ... --resume)" if partial.exists() else ""
        if not directory.exists():
            raise FileNotFoundError(f"{directory}: no such index directory (one `elmo index --out` wrote){hint}")
        if not directory.is_dir():
            raise SearchError(f"{directory} is a file; expected an index directory (one `elmo index --out` wrote)",
                              "directory")
        if not meta_file.is_file():
            raise FileNotFoundError(f"{directory} is not a finished index (no {layout.META}){hint}")
        for attempt in range(_LOAD_ATTEMPTS):
            try:
                meta, files = _open_files(directory)
                break
            except _Swapped:  # a rebuild was published meanwhile: open the new version
                if attempt == _LOAD_ATTEMPTS - 1:
                    raise SearchError(f"{directory} was replaced {_LOAD_ATTEMPTS} times while it loaded (rebuilt "
                                      "again and again?); load it when no build publishes", "directory") from None
        _check_file_sizes(directory, meta, files)
        return cls(directory, meta, files, embedder)

    @property
    def n_indexed(self) -> int:
        return self.meta["n_indexed"]

    @property
    def window(self) -> dict[str, int]:
        """How the corpus's long sentences were cut (``max_window_tokens``, ``window_context``): recorded in
        meta.json, or for an index built before it was recorded (format 2, until 2026-12-05), the defaults then
        (``elmo.windows.EARLIER_DEFAULTS``)."""
        return self.meta.get("window", EARLIER_DEFAULTS)

    def check_reads_as(self, tokenizer: str, window: dict[str, int], reader: str) -> None:
        """SearchError unless ``reader`` (an embedder, a served model) splits query text with the index's tokenizer
        and cuts long sentences into its windows (``window_of``): a query sentence would get other vectors than its
        corpus twin. Checked when the embedder is first used, and by ``elmo serve`` before any model loads."""
        if tokenizer != self.meta["tokenizer"]:
            raise SearchError(f"{reader} splits text with the {tokenizer!r} tokenizer, {self.directory} was built with "
                              f"{self.meta['tokenizer']!r}: query sentences must be split as the corpus was; load the "
                              "embedder with that tokenizer", "embedder")
        built_with = self.window
        if window != built_with:
            raise SearchError(f"{reader} cuts long sentences as {window}: give --max-sentence-tokens "
                              f"{built_with['max_window_tokens']} --window-context {built_with['window_context']} "
                              f"(elmo serve), or load the embedder with those; {self.directory} was built with "
                              f"{built_with}, and a long query sentence would get other vectors than its corpus twin",
                              "embedder")

    @property
    def model_source(self) -> str | None:
        """What loads the model the index was built with (``Embedder.load``, ``ModelDir.find``): its directory,
        or the shipped model's own directory when ``meta.json`` marks the name as shipped (``model_shipped``), so
        a directory of that name in the working directory is not taken for it. None if built from an embedder
        object without a name. Indexes from before ``model_shipped`` was recorded give the name as it is."""
        model = self.meta["model"]
        return None if model is None else layout.model_source(model, bool(self.meta.get("model_shipped")))

    @property
    def embedder(self) -> LayerEmbedder:
        """The model that embeds query sentences: the one given to ``load``, else the one named in meta.json
        with the tokenizer the corpus was split with. SearchError (field ``embedder``) if it is another model
        than the index was built with (``elmo.fingerprint``: options and weights), splits text with another
        tokenizer or carries state from batch to batch (``StatefulEmbedder``), checked once."""
        if self._embedder is None:
            from elmo.embedder import Embedder

            model = self.model_source
            if model is None:
                raise SearchError(f"{self.directory} was built from an Embedder object; pass that embedder to "
                                  "ContextIndex.load(..., embedder=...)", "embedder")
            window = self.window
            self._embedder = Embedder.load(model, tokenizer=self.meta["tokenizer"],
                                           max_window_tokens=window["max_window_tokens"],
                                           window_context=window["window_context"])
        if not self._embedder_checked:
            check_stateless(self._embedder, "embedder")
            fingerprint = self._embedder.fingerprint
            if fingerprint != self.meta["fingerprint"]:
                raise SearchError(f"the embedder's model (fingerprint {fingerprint[:12]}) differs from the one "
                                  f"{self.directory} was built with ({self.meta['fingerprint'][:12]}): other "
                                  "options or weights; query it with that model, or build the index again",
                                  "embedder")
            self.check_reads_as(self._embedder.tokenizer_name, window_of(self._embedder), "the embedder")
            self._embedder_checked = True
        return self._embedder

    def layer(self, layer: LayerChoice | str | None) -> str:
        """The stored layer's name for ``layer`` (default: the first indexed; ``top`` and negative indexes count
        from the model's top); SearchError naming the ones held."""
        if layer is None:
            return self.layers[0]
        try:
            name = layer_name(stored_layer(layer, self.n_layers))
        except LayerChoiceError as error:
            raise SearchError(str(error), "layer") from None
        if name not in self.layers:
            raise SearchError(f"the index holds {', '.join(self.layers)}, not {name}; "
                              f"build it with --layer {name.removeprefix('layer')}", "layer")
        return name

    def vectors(self, layer: LayerChoice | str | None = None) -> np.ndarray:
        """``(n_indexed, dim)`` float16 unit vectors of a layer, memory-mapped."""
        name = self.layer(layer)
        if name not in self._vectors:
            self._vectors[name] = _mapped(self._files[layout.vectors_file(name)],
                                          layout.VECTOR_DTYPE).reshape(self.n_indexed, self.dim)
        return self._vectors[name]

    def ann(self, layer: LayerChoice | str | None = None) -> "faiss.Index":
        name = self.layer(layer)
        if name not in self._ann:
            self._ann[name] = read_ann(_read_whole(self._files[layout.ann_file(name)]), self.meta["ann"]["nprobe"])
        return self._ann[name]

    def search(self, queries: np.ndarray, k: int = 10, layer: LayerChoice | str | None = None, exact: bool = False,
               rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` indexed tokens of highest cosine to each query (``(Q, dim)`` or ``(dim,)``), best first:
        scores and rows, each ``(Q, k)``. ANN candidates are re-ranked by exact cosine on the stored vectors;
        ``exact`` scans them all instead; ``rows`` restricts the search to those rows (always exact). SearchError
        (field ``k``) for a negative ``k``."""
        check_k(k)
        queries = unit_rows(np.atleast_2d(queries))
        if queries.shape[1] != self.dim:
            raise SearchError(f"query vectors have {queries.shape[1]} dimensions; the index holds {self.dim}",
                              "queries")
        vectors = self.vectors(layer)
        if exact or rows is not None:
            return exact_search(vectors, queries, k, rows)
        return ann_search(self.ann(layer), vectors, queries, k, self.meta["ann"]["candidates"])

    def occurrence(self, row: int) -> Occurrence:
        """The indexed token ``row``, its line split into the tokens the model embedded: cleaned (``clean_text``,
        as the build cleaned it before splitting; indexes from before it stored the clean text hold the line as
        read) and split by the index's tokenizer. SearchError (field ``directory``) if that split does not put the
        recorded word at the recorded position: the index was built with another cleaning or tokenizer."""
        record = self.tokens[row]
        line, position = int(record["sentence"]), int(record["position"])
        start, end = self.sentence_offsets[line], self.sentence_offsets[line + 1]
        line_bytes = os.pread(self._files[layout.SENTENCES], int(end - start - 1), int(start))
        text = clean_text(line_bytes.decode("utf-8"))
        tokens = self.tokenize(text)
        embedded = self.words[int(record["word"])]
        if position >= len(tokens) or tokens[position] != clean_text(embedded):
            found = repr(tokens[position]) if position < len(tokens) else f"nothing ({len(tokens)} tokens)"
            raise SearchError(f"{self.directory}: line {line} split by the {self.meta['tokenizer']!r} tokenizer has "
                              f"{found} at position {position}, where the index embedded {embedded!r}: it was "
                              "built with another text cleaning or tokenizer; build the index again", "directory")
        return Occurrence(row, line, text, tokens, position)

    def word_ids(self, word: str) -> np.ndarray:
        """Ids of the vocabulary's forms of ``word``, ignoring case, the word cleaned as the corpus was
        (``elmo.tokenizers.word_key``). SearchError (field ``word``) for a blank word (``query_key``)."""
        wanted = query_key(word)
        return np.array([i for i, form in enumerate(self.words) if form.casefold() == wanted], np.int64)

    def vocabulary_form(self, word: str) -> str | None:
        """``word`` as the corpus spells it: itself (cleaned as the corpus was) if present, else its most frequent
        case variant, else None."""
        ids = self.word_ids(word)
        if not len(ids):
            return None
        cleaned = clean_text(word).strip()
        return cleaned if cleaned in self.words else self.words[int(ids[np.argmax(self.counts[ids])])]

    def rows_of(self, word: str) -> np.ndarray:
        """Rows of every indexed occurrence of ``word`` (ignoring case, cleaned as the corpus was), in corpus
        order."""
        ids = self.word_ids(word)
        rows = [start + np.flatnonzero(np.isin(self.tokens["word"][start : start + CHUNK_ROWS], ids))
                for start in range(0, self.n_indexed, CHUNK_ROWS)]
        return np.concatenate(rows) if rows else np.zeros(0, np.int64)

    @property
    def static_vectors(self) -> "StaticVectors":
        """The model's layer 0 over the corpus vocabulary: context-free vectors, one per word type."""
        if self._static is None:
            from elmo.static_vectors import StaticVectors

            layer0 = np.frombuffer(_read_whole(self._files[layout.LAYER0]), layout.VECTOR_DTYPE).reshape(
                len(self.words), self.dim)
            self._static = StaticVectors(self.words, layer0, name="layer 0")
        return self._static
