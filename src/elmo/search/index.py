"""Every token of a corpus as a contextual vector on disk, behind an approximate-nearest-neighbour index.

An index directory holds

- ``meta.json``: the model, tokenizer, layers and sizes, and how the ANN index was made;
- ``sentences.txt`` + ``sentence_offsets.i8``: each corpus line as read, and the byte offset of each line
  (``n_sentences + 1`` int64), so a hit's sentence is one seek away;
- ``tokens.bin``: one ``TOKEN_DTYPE`` record per indexed token: its sentence, its position in the model
  tokenizer's tokens of that sentence, and its word id;
- ``vectors-<layer>.f16``: ``(n_tokens, dim)`` unit vectors in float16, read through a memory map, so the
  corpus may be larger than RAM;
- ``ann-<layer>.faiss``: faiss IVF-PQ over those vectors (``dim / 8`` bytes a token in RAM); candidates it
  finds are re-ranked by exact cosine on the float16 vectors (see docs/search.md for why faiss and the
  recall this costs);
- ``vocab.txt``, ``counts.npy``, ``layer0.f16``: every word type of the corpus, how often it occurs, and its
  context-free (layer 0) vector, for the static contrast.

``build_index`` writes into ``OUT.partial`` and renames it onto ``OUT`` only when complete; with
``resume=True`` an interrupted build continues after its last checkpoint.
"""

import io
import itertools
import json
import logging
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
from tqdm import tqdm

from elmo.embed_file import EmbedReport, TextFile, check_text_file, read_lines
from elmo.files import publish_directory, write_bytes_atomic, write_text_atomic
from elmo.tokenizers import get_tokenizer

if TYPE_CHECKING:
    import faiss

    from elmo.embedder import Embedder
    from elmo.search.neighbors import Neighbor
    from elmo.static_vectors import StaticVectors

log = logging.getLogger(__name__)

LayerSpec = int | Literal["average"]

TOKEN_DTYPE = np.dtype([("sentence", "<i8"), ("position", "<i4"), ("word", "<i4")])
FORMAT_VERSION = 1
_ADD_CHUNK = 65_536  # vectors converted to float32 at a time when adding to or scanning the index


def layer_name(layer: LayerSpec) -> str:
    return "average" if layer == "average" else f"layer{layer}"


def parse_layer(value: str | int) -> LayerSpec:
    """``"average"`` or a layer number (``"2"``, ``2``, ``"layer2"``); ValueError naming the value otherwise."""
    text = str(value)
    if text == "average":
        return "average"
    digits = text.removeprefix("layer")
    if not (digits.isascii() and digits.isdigit()):  # int() would read full-width digits too
        raise ValueError(f"layer {value!r}: expected a layer number (0, 1, 2, ...) or 'average'")
    return int(digits)


@dataclass(frozen=True)
class AnnOptions:
    """How the ANN index is made and searched.

    ``factory``: a faiss index_factory string; ``None`` sizes IVF-PQ to the corpus (``default_factory``).
    ``nprobe``: inverted lists visited per query. ``candidates``: hits per query re-ranked by exact cosine
    (at least ``k``). ``train_size``: vectors sampled to train the quantizers. ``exact_below``: a corpus with
    fewer tokens gets a flat (exact) index, as IVF-PQ cannot be trained on so few.
    """

    factory: str | None = None
    nprobe: int = 32
    candidates: int = 300
    train_size: int = 100_000
    exact_below: int = 20_000


def default_factory(n_vectors: int, dim: int, options: AnnOptions = AnnOptions()) -> str:
    """``Flat`` below ``options.exact_below``; else IVF with about ``sqrt(n)`` lists (a power of two, at most
    ``n / 39``, faiss's minimum of training points per centroid) and residuals coded by 4-bit fast-scan PQ over
    4-dimensional pieces (``dim / 8`` bytes a vector), or by 8-bit scalar quantization when ``dim`` is not a
    multiple of 8. docs/search.md has the measurements behind this choice."""
    if n_vectors < options.exact_below:
        return "Flat"
    nlist = 2 ** round(math.log2(math.sqrt(n_vectors)))
    while nlist > 1 and nlist * 39 > n_vectors:
        nlist //= 2
    return f"IVF{nlist},PQ{dim // 4}x4fsr" if dim % 8 == 0 else f"IVF{nlist},SQ8"


def build_ann(vectors: np.ndarray, options: AnnOptions = AnnOptions(), seed: int = 0) -> "faiss.Index":
    """An inner-product faiss index over ``vectors`` (``(n, dim)``, any float dtype, e.g. a float16 memmap),
    trained on a random sample and filled a chunk at a time, so only the codes are ever held in RAM."""
    import faiss

    n_vectors, dim = vectors.shape
    factory = options.factory or default_factory(n_vectors, dim, options)
    index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    if not index.is_trained:
        train_size = max(options.train_size, 40 * _nlist(index))
        rows = np.sort(np.random.default_rng(seed).choice(n_vectors, min(n_vectors, train_size), replace=False))
        index.train(np.ascontiguousarray(vectors[rows], dtype=np.float32))
    for start in range(0, n_vectors, _ADD_CHUNK):
        index.add(np.ascontiguousarray(vectors[start : start + _ADD_CHUNK], dtype=np.float32))
    return index


def _nlist(index: "faiss.Index") -> int:
    import faiss

    try:
        return faiss.extract_index_ivf(index).nlist
    except RuntimeError:  # not an IVF index
        return 1


def exact_search(
    vectors: np.ndarray, queries: np.ndarray, k: int, rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Brute force: the ``k`` rows of highest inner product with each query, best first.

    ``vectors``: ``(n, dim)`` (a memmap is scanned a chunk at a time); ``queries``: ``(Q, dim)``; ``rows``: search
    only these rows. Returns scores ``(Q, k')`` float32 and row ids ``(Q, k')`` int64, ``k' = min(k, candidates)``.
    """
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    candidates = np.arange(len(vectors)) if rows is None else np.asarray(rows, dtype=np.int64)
    k = min(k, len(candidates))
    best_scores = np.full((len(queries), 0), -np.inf, np.float32)
    best_ids = np.zeros((len(queries), 0), np.int64)
    for start in range(0, len(candidates), _ADD_CHUNK):
        chunk_ids = candidates[start : start + _ADD_CHUNK]
        block = vectors[chunk_ids] if rows is not None else vectors[start : start + len(chunk_ids)]
        scores = queries @ np.asarray(block, dtype=np.float32).T
        best_scores = np.concatenate([best_scores, scores], axis=1)
        best_ids = np.concatenate([best_ids, np.broadcast_to(chunk_ids, scores.shape)], axis=1)
        if best_scores.shape[1] > k:
            keep = np.argpartition(-best_scores, k - 1, axis=1)[:, :k]
            best_scores = np.take_along_axis(best_scores, keep, axis=1)
            best_ids = np.take_along_axis(best_ids, keep, axis=1)
    order = np.argsort(-best_scores, axis=1, kind="stable")
    return np.take_along_axis(best_scores, order, axis=1), np.take_along_axis(best_ids, order, axis=1)


def ann_search(ann: "faiss.Index", vectors: np.ndarray, queries: np.ndarray, k: int,
               candidates: int) -> tuple[np.ndarray, np.ndarray]:
    """``exact_search``'s answer, approximately: the ANN index proposes ``max(k, candidates)`` rows a query and
    exact inner products on ``vectors`` rank them. Rows it could not fill are -1 with score -inf."""
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    _, proposed = ann.search(queries, min(max(k, candidates), len(vectors)))
    scores = np.full((len(queries), k), -np.inf, np.float32)
    best = np.full((len(queries), k), -1, np.int64)
    for q, found in enumerate(proposed):
        found = np.unique(found[found >= 0])  # sorted, so a memmap is read in order
        exact_scores = np.asarray(vectors[found], dtype=np.float32) @ queries[q]
        top = np.argsort(-exact_scores, kind="stable")[:k]
        scores[q, : len(top)], best[q, : len(top)] = exact_scores[top], found[top]
    return scores, best


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 in float32 (zero rows stay zero), so inner product is cosine."""
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


# --- building ---------------------------------------------------------------------------------------------


@dataclass
class IndexReport:
    sentences: int = 0
    tokens: int = 0
    indexed_tokens: int = 0
    words: int = 0
    resumed_from: int = 0
    factories: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


class _PartialIndex:
    """The files of an index being built, appended a checkpoint at a time.

    ``progress.json`` records, after each checkpoint, how many lines are done and the byte length of every
    appended file, so a resumed build cuts off whatever a killed run wrote after its last checkpoint.
    """

    APPENDED = ("sentences.txt", "sentence_offsets.i8", "tokens.bin", "vocab.txt", "layer0.f16")

    def __init__(self, directory: Path, settings: dict, layers: Sequence[str], resume: bool) -> None:
        self.directory = directory
        self.settings = settings
        self.files = [*self.APPENDED, *(f"vectors-{name}.f16" for name in layers)]
        progress_file = directory / "progress.json"
        progress = json.loads(progress_file.read_text()) if resume and progress_file.is_file() else None
        if progress is not None and progress["settings"] != settings:
            raise ValueError(f"{directory} was made with other settings or input; run without --resume")
        if progress is None:
            if directory.exists():
                for child in directory.iterdir():
                    child.unlink()
            directory.mkdir(parents=True, exist_ok=True)
            progress = {"settings": settings, "lines": 0, "tokens": 0, "indexed": 0, "embedded": False,
                        "sizes": dict.fromkeys(self.files, 0)}
            (directory / "sentence_offsets.i8").write_bytes(np.zeros(1, np.int64).tobytes())
            progress["sizes"]["sentence_offsets.i8"] = 8
        for name in self.files:
            path = directory / name
            path.touch()
            os.truncate(path, progress["sizes"][name])
        self.progress = progress
        self.handles = {name: (directory / name).open("ab") for name in self.files}
        vocab_text = (directory / "vocab.txt").read_bytes().decode("utf-8")
        self.words: dict[str, int] = {word: i for i, word in enumerate(vocab_text.split("\n")[:-1])}
        counts_file = directory / "counts.npy"
        counts = np.load(counts_file) if progress["lines"] and counts_file.is_file() else np.zeros(0, np.int64)
        self.counts = list(counts[: len(self.words)].tolist())
        self.text_bytes = progress["sizes"]["sentences.txt"]

    def add(self, text: str, tokens: Sequence[str], all_layers: np.ndarray, layers: Sequence[LayerSpec],
            indexed: set[str] | None) -> None:
        """One sentence: its text, its tokens' records and vectors (``all_layers``: ``(n_layers, T, dim)``)."""
        encoded = (text + "\n").encode("utf-8")
        self.text_bytes += len(encoded)
        self.handles["sentences.txt"].write(encoded)
        self.handles["sentence_offsets.i8"].write(np.array([self.text_bytes], np.int64).tobytes())
        sentence = self.progress["lines"]
        positions = []
        for position, token in enumerate(tokens):
            word = self.words.get(token)
            if word is None:
                word = self.words[token] = len(self.words)
                self.counts.append(0)
                self.handles["vocab.txt"].write((token + "\n").encode("utf-8"))
                self.handles["layer0.f16"].write(all_layers[0, position].astype(np.float16).tobytes())
            self.counts[word] += 1
            if indexed is None or token.casefold() in indexed:
                positions.append((position, word))
        self.progress["lines"] += 1
        self.progress["tokens"] += len(tokens)
        if not positions:
            return
        records = np.zeros(len(positions), TOKEN_DTYPE)
        records["sentence"] = sentence
        records["position"], records["word"] = zip(*positions, strict=True)
        self.handles["tokens.bin"].write(records.tobytes())
        chosen = records["position"]
        for layer in layers:
            vectors = all_layers[:, chosen].mean(axis=0) if layer == "average" else all_layers[layer, chosen]
            self.handles[f"vectors-{layer_name(layer)}.f16"].write(unit_rows(vectors).astype(np.float16).tobytes())
        self.progress["indexed"] += len(positions)

    def checkpoint(self) -> None:
        for name, handle in self.handles.items():
            handle.flush()
            os.fsync(handle.fileno())
            self.progress["sizes"][name] = handle.tell()
        buffer = io.BytesIO()
        np.save(buffer, np.array(self.counts, np.int64))
        write_bytes_atomic(self.directory / "counts.npy", buffer.getvalue())
        write_text_atomic(self.directory / "progress.json", json.dumps(self.progress))

    def close(self) -> None:
        for handle in self.handles.values():
            handle.close()


def _read_words(path: Path) -> set[str]:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such words file (expected one word a line)")
    words = {line.strip().casefold() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}
    if not words:
        raise ValueError(f"{path} lists no words; expected one word a line")
    return words


def check_corpus(corpus: Path) -> TextFile:
    """Refuse a corpus that is missing, empty, binary or blank before any work (see ``check_text_file``)."""
    text = check_text_file(corpus, "corpus file")
    if not text.has_text:
        raise ValueError(f"{corpus} holds only blank lines; expected a text corpus, one sentence a line")
    return text


def build_index(
    corpus: str | Path,
    out: str | Path,
    model: "str | Path | Embedder",
    layers: Sequence[LayerSpec] | None = None,
    words_only: str | Path | Iterable[str] | None = None,
    batch_size: int = 32,
    resume: bool = False,
    progress: bool = True,
    ann: AnnOptions = AnnOptions(),
    checkpoint_lines: int | None = None,
    model_name: str | None = None,
) -> IndexReport:
    """Embed every token of ``corpus`` (one sentence a line) and index it in the directory ``out``.

    ``model``: a model directory, a shipped model name or an ``Embedder``. ``model_name``: how
    ``ContextIndex.load`` finds the model again for sentence queries (default: ``model`` when it is a name or
    a directory; for an ``Embedder`` without one, pass the same embedder back to ``ContextIndex.load``).
    ``layers``: which layers to index, each a number or ``"average"`` (default: the top layer).
    ``words_only``: index only these words (a file of one word a line, or the words; matched ignoring case);
    every word still enters the vocabulary for the static contrast.
    ``checkpoint_lines``: lines between checkpoints (default ``batch_size * embedder.bucket_batches``).
    """
    from elmo.embedder import Embedder

    corpus, out = Path(corpus), Path(out)
    text = check_corpus(corpus)
    embedder = model if isinstance(model, Embedder) else Embedder.load(str(model))
    if model_name is None and not isinstance(model, Embedder):
        model_name = str(model)
    model_name = _model_reference(model_name) if model_name is not None else None
    chosen = [embedder.n_layers - 1] if layers is None else [parse_layer(layer) for layer in layers]
    for layer in chosen:
        if layer != "average" and not 0 <= layer < embedder.n_layers:
            raise ValueError(f"layer {layer}: the model has layers 0..{embedder.n_layers - 1} (or 'average')")
    if len({layer_name(layer) for layer in chosen}) != len(chosen):
        raise ValueError(f"layers {chosen} name a layer twice")
    if words_only is None:
        indexed = None
    else:
        indexed = _read_words(Path(words_only)) if isinstance(words_only, str | Path) else \
            {word.casefold() for word in words_only}
    names = [layer_name(layer) for layer in chosen]
    settings = {"corpus": str(corpus.resolve()), "sha256": text.sha256, "model": repr(embedder.bilm.config),
                "tokenizer": embedder.tokenizer_name, "layers": names,
                "words_only": sorted(indexed) if indexed is not None else None}
    partial = out.with_name(out.name + ".partial")
    state = _PartialIndex(partial, settings, names, resume)
    report = IndexReport(resumed_from=state.progress["lines"])
    try:
        if not state.progress["embedded"]:
            _embed_corpus(corpus, state, embedder, chosen, indexed, batch_size,
                          checkpoint_lines or batch_size * embedder.bucket_batches, progress, report)
    finally:
        state.close()
    n_indexed = state.progress["indexed"]
    if n_indexed == 0:
        raise ValueError(f"{corpus}: no token to index" + (" among --words-only" if indexed is not None else ""))
    import faiss

    for name in names:
        vectors = np.memmap(partial / f"vectors-{name}.f16", np.float16, "r", shape=(n_indexed, embedder.dim))
        faiss.write_index(build_ann(vectors, ann), str(partial / f"ann-{name}.faiss"))
        report.factories[name] = ann.factory or default_factory(n_indexed, embedder.dim, ann)
    meta = {"format": FORMAT_VERSION, "model": model_name, "model_config": settings["model"],
            "tokenizer": embedder.tokenizer_name, "corpus": settings["corpus"], "layers": names,
            "dim": embedder.dim, "n_sentences": state.progress["lines"], "n_tokens": state.progress["tokens"],
            "n_indexed": n_indexed, "n_words": len(state.words), "words_only": settings["words_only"],
            "ann": {"factories": report.factories, "nprobe": ann.nprobe, "candidates": ann.candidates}}
    write_text_atomic(partial / "meta.json", json.dumps(meta, indent=2))
    (partial / "progress.json").unlink()
    publish_directory(partial, out)
    report.sentences, report.tokens = meta["n_sentences"], meta["n_tokens"]
    report.indexed_tokens, report.words = n_indexed, meta["n_words"]
    for warning in report.warnings:
        log.warning(warning)
    return report


def _model_reference(model: str) -> str:
    """A directory as an absolute path (the index may be queried from elsewhere); a shipped name as it is."""
    return str(Path(model).resolve()) if Path(model).is_dir() else model


def _embed_corpus(corpus: Path, state: _PartialIndex, embedder: "Embedder", layers: Sequence[LayerSpec],
                  indexed: set[str] | None, batch_size: int, checkpoint_lines: int, progress: bool,
                  report: IndexReport) -> None:
    with corpus.open("rb") as handle:
        total = sum(1 for _ in handle)
    read_report = EmbedReport()
    lines = read_lines(corpus, read_report)
    done = sum(1 for _ in itertools.islice(lines, state.progress["lines"]))
    bar = tqdm(total=total, initial=done, unit=" sentences", desc="indexing", disable=not progress)
    while texts := list(itertools.islice(lines, checkpoint_lines)):
        token_lists = [embedder.tokenize(text) for text in texts]
        for text, tokens, all_layers in zip(texts, token_lists, embedder.iter_embed(token_lists, "all", batch_size),
                                            strict=True):
            state.add(text, tokens, all_layers, layers, indexed)
        state.checkpoint()
        bar.update(len(texts))
        bar.set_postfix(tokens=state.progress["tokens"])
    bar.close()
    state.progress["embedded"] = True
    state.checkpoint()
    report.warnings.extend(read_report.warnings)


# --- reading ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Occurrence:
    """One indexed token: the corpus line it is in (0-based), that line's text, its tokens and its position."""

    row: int
    line: int
    sentence: str
    tokens: list[str]
    token_index: int

    @property
    def token(self) -> str:
        return self.tokens[self.token_index]


class ContextIndex:
    """An index directory written by ``build_index``, memory-mapped; the ANN indexes load on first use."""

    def __init__(self, directory: Path, meta: dict, embedder: "Embedder | None" = None) -> None:
        self.directory = directory
        self.meta = meta
        self.layers: list[str] = meta["layers"]
        self.dim: int = meta["dim"]
        self.tokenize = get_tokenizer(meta["tokenizer"])
        self.tokens = np.memmap(directory / "tokens.bin", TOKEN_DTYPE, "r", shape=(meta["n_indexed"],))
        self.sentence_offsets = np.memmap(directory / "sentence_offsets.i8", np.int64, "r")
        vocab_text = (directory / "vocab.txt").read_bytes().decode("utf-8")
        self.words: list[str] = vocab_text.split("\n")[:-1]
        self.counts = np.load(directory / "counts.npy")
        self._embedder = embedder
        self._vectors: dict[str, np.ndarray] = {}
        self._ann: dict[str, faiss.Index] = {}
        self._static: StaticVectors | None = None

    @classmethod
    def load(cls, directory: str | Path, embedder: "Embedder | None" = None) -> "ContextIndex":
        """``embedder``: the model that answers sentence queries (default: the one the index was built with)."""
        directory = Path(directory)
        meta_file = directory / "meta.json"
        if not meta_file.is_file():
            partial = directory.with_name(directory.name + ".partial")
            hint = f"; {partial} is an unfinished build (elmo index ... --resume)" if partial.exists() else ""
            raise FileNotFoundError(f"{directory} is not a finished index (no meta.json){hint}")
        meta = json.loads(meta_file.read_text())
        if meta.get("format") != FORMAT_VERSION:
            raise ValueError(f"{meta_file}: index format {meta.get('format')!r}; this version reads {FORMAT_VERSION}")
        return cls(directory, meta, embedder)

    @property
    def n_indexed(self) -> int:
        return self.meta["n_indexed"]

    @property
    def embedder(self) -> "Embedder":
        if self._embedder is None:
            from elmo.embedder import Embedder

            if self.meta["model"] is None:
                raise ValueError(f"{self.directory} was built from an Embedder object; pass that embedder to "
                                 "ContextIndex.load(..., embedder=...)")
            self._embedder = Embedder.load(self.meta["model"], tokenizer=self.meta["tokenizer"])
        if repr(self._embedder.bilm.config) != self.meta["model_config"]:
            raise ValueError(f"the embedder's model differs from the one {self.directory} was built with")
        return self._embedder

    def layer(self, layer: LayerSpec | str | None) -> str:
        """The stored layer's name for ``layer`` (default: the first indexed); ValueError naming the ones held."""
        if layer is None:
            return self.layers[0]
        name = layer_name(parse_layer(layer))
        if name not in self.layers:
            raise ValueError(f"{self.directory} holds {', '.join(self.layers)}, not {name}; "
                             f"rebuild it with --layer {name.removeprefix('layer')}")
        return name

    def vectors(self, layer: LayerSpec | str | None = None) -> np.ndarray:
        """``(n_indexed, dim)`` float16 unit vectors of a layer, memory-mapped."""
        name = self.layer(layer)
        if name not in self._vectors:
            self._vectors[name] = np.memmap(self.directory / f"vectors-{name}.f16", np.float16, "r",
                                            shape=(self.n_indexed, self.dim))
        return self._vectors[name]

    def ann(self, layer: LayerSpec | str | None = None) -> "faiss.Index":
        import faiss

        name = self.layer(layer)
        if name not in self._ann:
            index = faiss.read_index(str(self.directory / f"ann-{name}.faiss"))
            if _nlist(index) > 1:
                faiss.extract_index_ivf(index).nprobe = self.meta["ann"]["nprobe"]
            self._ann[name] = index
        return self._ann[name]

    def search(self, queries: np.ndarray, k: int = 10, layer: LayerSpec | str | None = None, exact: bool = False,
               rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` indexed tokens of highest cosine to each query (``(Q, dim)`` or ``(dim,)``), best first:
        scores and rows, each ``(Q, k)``. ANN candidates are re-ranked by exact cosine on the stored vectors;
        ``exact`` scans them all instead; ``rows`` restricts the search to those rows (always exact)."""
        queries = unit_rows(np.atleast_2d(queries))
        if queries.shape[1] != self.dim:
            raise ValueError(f"query vectors have {queries.shape[1]} dimensions; the index holds {self.dim}")
        vectors = self.vectors(layer)
        if exact or rows is not None:
            return exact_search(vectors, queries, k, rows)
        return ann_search(self.ann(layer), vectors, queries, k, self.meta["ann"]["candidates"])

    def occurrence(self, row: int) -> Occurrence:
        record = self.tokens[row]
        line = int(record["sentence"])
        start, end = self.sentence_offsets[line], self.sentence_offsets[line + 1]
        with (self.directory / "sentences.txt").open("rb") as handle:
            handle.seek(start)
            text = handle.read(end - start - 1).decode("utf-8")
        return Occurrence(row, line, text, self.tokenize(text), int(record["position"]))

    def word_ids(self, word: str) -> np.ndarray:
        """Ids of the vocabulary's forms of ``word``, ignoring case."""
        wanted = word.casefold()
        return np.array([i for i, form in enumerate(self.words) if form.casefold() == wanted], np.int64)

    def vocabulary_form(self, word: str) -> str | None:
        """``word`` as the corpus spells it: itself if present, else its most frequent case variant, else None."""
        ids = self.word_ids(word)
        if not len(ids):
            return None
        return word if word in self.words else self.words[int(ids[np.argmax(self.counts[ids])])]

    def rows_of(self, word: str) -> np.ndarray:
        """Rows of every indexed occurrence of ``word`` (ignoring case), in corpus order."""
        ids = self.word_ids(word)
        rows = [start + np.flatnonzero(np.isin(self.tokens["word"][start : start + _ADD_CHUNK], ids))
                for start in range(0, self.n_indexed, _ADD_CHUNK)]
        return np.concatenate(rows) if rows else np.zeros(0, np.int64)

    @property
    def static_vectors(self) -> "StaticVectors":
        """The model's layer 0 over the corpus vocabulary: context-free vectors, one per word type."""
        if self._static is None:
            from elmo.static_vectors import StaticVectors

            layer0 = np.fromfile(self.directory / "layer0.f16", np.float16).reshape(len(self.words), self.dim)
            self._static = StaticVectors(self.words, layer0, name="layer 0")
        return self._static

    def neighbors(self, sentence: str | Sequence[str], word: str, k: int = 10, layer: LayerSpec | str | None = None,
                  same_word: bool = False, exact: bool = False, occurrence: int = 0) -> "list[Neighbor]":
        """The ``k`` indexed tokens nearest to ``word`` as used in ``sentence`` (its ``occurrence``-th use
        there), other than that very token if the sentence is in the corpus; ``same_word`` keeps to
        occurrences of the same word (ignoring case), as the paper's table does."""
        from elmo.search.neighbors import Neighbor, query_vector

        name = self.layer(layer)
        tokens, position, vector = query_vector(self.embedder, sentence, word, parse_layer(name), occurrence)
        rows = self.rows_of(word) if same_word else None
        if rows is not None and not len(rows):
            raise ValueError(f"{word!r} does not occur among the indexed tokens of {self.directory}")
        available = self.n_indexed if rows is None else len(rows)
        wanted = k + 1
        while True:  # the query token itself may be in the corpus, more than once: ask for more until k others
            scores, found = self.search(vector, wanted, name, exact, rows)
            results = []
            for score, row in zip(scores[0], found[0], strict=True):
                hit = self.occurrence(int(row)) if row >= 0 else None
                if hit is not None and not (hit.tokens == tokens and hit.token_index == position):
                    results.append(Neighbor(hit.sentence, hit.token_index, hit.token, float(score), hit.line,
                                            hit.tokens))
            if len(results) >= k or wanted >= available:
                return results[:k]
            wanted *= 2
