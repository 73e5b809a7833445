"""Writing an index directory (``layout.py``) from a corpus: every token embedded, appended a checkpoint at a
time, then the ANN index over each layer.

``build_index`` writes into ``OUT.partial`` and renames it onto ``OUT`` only when complete; with
``resume=True`` an interrupted build continues after its last checkpoint, to the same bytes as an
uninterrupted one.
"""

import io
import itertools
import json
import logging
import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from elmo.embed_job.source import EmbedReport, TextFile, check_text_file, read_lines
from elmo.extras import require
from elmo.files import (
    NotUtf8Error,
    check_not_a_link,
    check_output_directory,
    publish_directory,
    remove_partial_directories_of,
    utf8_lines,
    write_bytes_atomic,
    write_text_atomic,
)
from elmo.layer_choice import LayerChoice, LayerChoiceError, StoredLayer, stored_layer
from elmo.search import layout
from elmo.search.ann import (
    UNTRAINED,
    AnnOptions,
    build_ann,
    default_factory,
    faiss_reason,
    unit_rows,
    write_ann,
)
from elmo.search.errors import SearchError
from elmo.search.layout import layer_name
from elmo.search.model import LayerEmbedder, check_stateless, window_of
from elmo.tokenizers import clean_text, word_key

log = logging.getLogger(__name__)

CHECKPOINT_BATCHES = 16  # batches of lines between checkpoints: one chunk of Embedder's (its bucket_batches)
TRIAL_VECTORS = 8  # random vectors _check_factory adds to a trial index of --factory


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

    APPENDED = (layout.SENTENCES, layout.SENTENCE_OFFSETS, layout.TOKENS, layout.VOCAB, layout.LAYER0)

    def __init__(self, directory: Path, settings: dict, layers: Sequence[str], resume: bool) -> None:
        self.directory = directory
        self.settings = settings
        self.files = [*self.APPENDED, *(layout.vectors_file(name) for name in layers)]
        progress_file = directory / layout.PROGRESS
        progress = json.loads(progress_file.read_text()) if resume and progress_file.is_file() else None
        if resume and progress is None and (directory / layout.META).is_file():
            progress = self._finished_progress()
        if progress is not None and progress["settings"] != settings:
            raise SearchError(f"{directory} was made with other settings or input; run without --resume", "resume")
        if progress is None:
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True)
            progress = {"settings": settings, "lines": 0, "tokens": 0, "indexed": 0, "embedded": False,
                        "sizes": dict.fromkeys(self.files, 0)}
            first_offset = np.zeros(1, layout.OFFSET_DTYPE).tobytes()
            (directory / layout.SENTENCE_OFFSETS).write_bytes(first_offset)
            progress["sizes"][layout.SENTENCE_OFFSETS] = len(first_offset)
        for name in self.files:
            path = directory / name
            path.touch()
            if path.stat().st_size < progress["sizes"][name]:
                raise SearchError(f"{path} is shorter than its last checkpoint recorded (lost or damaged); "
                                  "run without --resume", "resume")
            os.truncate(path, progress["sizes"][name])
        self.progress = progress
        self.handles = {name: (directory / name).open("ab") for name in self.files}
        self.words: dict[str, int] = {word: i for i, word in enumerate(layout.read_vocabulary(directory))}
        counts_file = directory / progress.get("counts", layout.COUNTS)
        counts = np.load(counts_file) if progress["lines"] and counts_file.is_file() else np.zeros(0, np.int64)
        self.counts = list(counts[: len(self.words)].tolist())
        for leftover in directory.glob("counts-*.npy"):  # written by a run killed before its progress was
            if leftover != counts_file:
                leftover.unlink()
        self.text_bytes = progress["sizes"][layout.SENTENCES]

    def add(self, text: str, tokens: Sequence[str], all_layers: np.ndarray, layers: Sequence[StoredLayer],
            indexed: set[str] | None) -> None:
        """One sentence: its text (cleaned, the text ``tokens`` were split from), its tokens' records and vectors
        (``all_layers``: ``(n_layers, T, dim)``); ``indexed``: the ``word_key`` of each word to index, or None."""
        encoded = (text + "\n").encode("utf-8")
        self.text_bytes += len(encoded)
        self.handles[layout.SENTENCES].write(encoded)
        self.handles[layout.SENTENCE_OFFSETS].write(np.array([self.text_bytes], layout.OFFSET_DTYPE).tobytes())
        sentence = self.progress["lines"]
        positions = []
        for position, token in enumerate(tokens):
            word = self.words.get(token)
            if word is None:
                word = self.words[token] = len(self.words)
                self.counts.append(0)
                self.handles[layout.VOCAB].write((token + "\n").encode("utf-8"))
                self.handles[layout.LAYER0].write(all_layers[0, position].astype(layout.VECTOR_DTYPE).tobytes())
            self.counts[word] += 1
            if indexed is None or word_key(token) in indexed:
                positions.append((position, word))
        self.progress["lines"] += 1
        self.progress["tokens"] += len(tokens)
        if not positions:
            return
        records = np.zeros(len(positions), layout.TOKEN_DTYPE)
        records["sentence"] = sentence
        records["position"], records["word"] = zip(*positions, strict=True)
        self.handles[layout.TOKENS].write(records.tobytes())
        chosen = records["position"]
        for layer in layers:
            vectors = all_layers[:, chosen].mean(axis=0) if layer == "average" else all_layers[layer, chosen]
            self.handles[layout.vectors_file(layer_name(layer))].write(
                unit_rows(vectors).astype(layout.VECTOR_DTYPE).tobytes())
        self.progress["indexed"] += len(positions)

    def checkpoint(self) -> None:
        for name, handle in self.handles.items():
            handle.flush()
            os.fsync(handle.fileno())
            self.progress["sizes"][name] = handle.tell()
        buffer = io.BytesIO()
        np.save(buffer, np.array(self.counts, np.int64))
        # The counts go to a file named by the lines they count, which progress.json then names: a run killed
        # between the two writes resumes from the counts that go with its lines (and does not count a chunk twice).
        previous, counts = self.progress.get("counts"), f"counts-{self.progress['lines']}.npy"
        write_bytes_atomic(self.directory / counts, buffer.getvalue())
        self.progress["counts"] = counts
        write_text_atomic(self.directory / layout.PROGRESS, json.dumps(self.progress))
        if previous not in (None, counts):
            (self.directory / previous).unlink(missing_ok=True)

    def finish(self) -> None:
        """The counts under the name the index reads them by; ``progress.json`` stays until the index is
        published, so a build killed before that resumes from here rather than starting over."""
        counts = self.directory / self.progress["counts"]
        if counts.name != layout.COUNTS and (counts.is_file() or not (self.directory / layout.COUNTS).is_file()):
            os.replace(counts, self.directory / layout.COUNTS)  # else a killed finish() renamed it already
        self.progress["counts"] = layout.COUNTS
        write_text_atomic(self.directory / layout.PROGRESS, json.dumps(self.progress))

    def close(self) -> None:
        for handle in self.handles.values():
            handle.close()

    def _finished_progress(self) -> dict:
        """The progress of a finished partial index (``meta.json`` written, ``progress.json`` deleted before
        publishing: a build killed then), rebuilt from its ``meta.json`` so the resumed build skips the embedding
        and only builds the ANN index again and publishes."""
        directory = self.directory
        meta = json.loads((directory / layout.META).read_text(encoding="utf-8"))
        built_with = {setting: meta.get(key) for setting, key in layout.SETTINGS_IN_META.items()}
        sizes = {name: (directory / name).stat().st_size if (directory / name).is_file() else 0
                 for name in self.files}
        return {"settings": built_with, "lines": meta.get("n_sentences", 0), "tokens": meta.get("n_tokens", 0),
                "indexed": meta.get("n_indexed", 0), "embedded": True, "counts": layout.COUNTS, "sizes": sizes}


def _read_words(path: Path) -> set[str]:
    """The ``word_key`` of each line of the --words-only file ``path`` (a leading byte-order mark dropped); errors
    name the file and, for bytes that are not UTF-8, the byte and the line (``elmo.files.NotUtf8Error``'s message;
    a bare codec error names neither)."""
    if path.is_dir():
        raise SearchError(f"{path} is a directory; expected a words file, one word a line", "words_only")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such words file (expected one word a line)")
    try:  # read in blocks: only the words are held; a line splits where str.splitlines splits it
        words = {word_key(entry) for text in utf8_lines(path) for entry in text.splitlines()} - {""}
    except NotUtf8Error as error:
        raise SearchError(str(error), "words_only") from error
    if not words:
        raise SearchError(f"{path} lists no words; expected one word a line", "words_only")
    return words


def check_corpus(corpus: Path) -> TextFile:
    """Refuse a corpus that is missing, empty, binary or blank before any work (see ``check_text_file``)."""
    text = check_text_file(corpus, "corpus file")
    if not text.has_text:
        raise SearchError(f"{corpus} holds only blank lines; expected a text corpus, one sentence a line", "corpus")
    return text


def _chosen_layers(layers: LayerChoice | str | Sequence[LayerChoice | str] | None, n_layers: int) -> list[StoredLayer]:
    """The layers to index (default: the top one), each one the model has, none twice."""
    if layers is None:
        return [n_layers - 1]
    given = [layers] if isinstance(layers, str | int | np.integer) else layers
    try:
        chosen = [stored_layer(layer, n_layers) for layer in given]
    except LayerChoiceError as error:
        raise SearchError(str(error), "layers") from None
    if not chosen:
        raise SearchError("layers is empty; name at least one layer, or None for the top one", "layers")
    if len({layer_name(layer) for layer in chosen}) != len(chosen):
        raise SearchError(f"layers {list(given)} name a layer twice", "layers")
    return chosen


def check_index_options(out: Path, layers: LayerChoice | str | Sequence[LayerChoice | str] | None, n_layers: int,
                        dim: int, factory: str | None, words_only: str | Path | Iterable[str] | None
                        ) -> tuple[list[StoredLayer], set[str] | None]:
    """``build_index``'s checks of its options, which need the model's shape only (``elmo index`` makes them
    from options.json before the weights load): the layers chosen and the words to index, each as its
    ``word_key`` (cleaned as corpus lines are, casefolded; None: every word)."""
    _check_out(out)
    if factory is not None:
        _check_factory(factory, dim)
    chosen = _chosen_layers(layers, n_layers)
    if words_only is None:
        return chosen, None
    indexed = _read_words(Path(words_only)) if isinstance(words_only, str | Path) else \
        {word_key(word) for word in words_only} - {""}
    if not indexed:
        raise SearchError("words_only lists no words; give at least one, or None to index every token", "words_only")
    phrases = sorted(word for word in indexed if len(word.split()) > 1)
    if phrases:
        raise SearchError(f"words_only lists {phrases[:5]}: each entry is matched against one token, so an "
                          "entry of several words never matches; list single words", "words_only")
    return chosen, indexed


def build_index(
    corpus: str | Path,
    out: str | Path,
    model: str | Path | LayerEmbedder,
    layers: LayerChoice | str | Sequence[LayerChoice | str] | None = None,
    words_only: str | Path | Iterable[str] | None = None,
    batch_size: int = 32,
    resume: bool = False,
    progress: bool = True,
    ann: AnnOptions | None = None,
    checkpoint_lines: int | None = None,
    model_name: str | None = None,
) -> IndexReport:
    """Embed every token of ``corpus`` (one sentence a line) and index it in the directory ``out``.

    ``model``: a model directory, a shipped model name or an embedder (``LayerEmbedder``, e.g. an ``Embedder``
    loaded with the tokenizer wanted; a ``StatefulEmbedder`` is refused, field ``model``). ``model_name``: how
    ``ContextIndex.load`` finds the model again for sentence queries (default: ``model`` when it is a name or a
    directory; for an embedder without one, pass the same embedder back to ``ContextIndex.load``).
    ``layers``: which layers to index, one or a list, each a layer index, ``"top"`` or ``"average"`` (as in
    ``elmo.layer_choice``; default: the top layer).
    ``words_only``: index only these words (a file of one word a line, or the words; matched ignoring case);
    every word still enters the vocabulary for the static contrast.
    ``ann``: how the ANN index is made (default ``AnnOptions()``). ``checkpoint_lines``: lines between
    checkpoints (default ``batch_size * CHECKPOINT_BATCHES``).
    """
    require("search", "elmo.search.build_index")  # faiss comes last, after every line is embedded
    if batch_size < 1 or (checkpoint_lines is not None and checkpoint_lines < 1):
        raise SearchError(f"batch_size {batch_size}, checkpoint_lines {checkpoint_lines}: expected at least 1",
                          "batch_size" if batch_size < 1 else "checkpoint_lines")
    ann = AnnOptions() if ann is None else ann
    corpus, out = Path(corpus), Path(out)
    text = check_corpus(corpus)
    _check_out(out)  # before a named model loads; check_index_options makes the rest of the checks
    if isinstance(model, str | Path):
        from elmo.embedder import Embedder

        embedder: LayerEmbedder = Embedder.load(layout.model_source(*_model_reference(str(model))))
        model_name = str(model) if model_name is None else model_name
    else:
        embedder = model
        check_stateless(embedder, "model")
    model_name, shipped = _model_reference(model_name) if model_name is not None else (None, False)
    chosen, indexed = check_index_options(out, layers, embedder.n_layers, embedder.dim, ann.factory, words_only)
    names = [layer_name(layer) for layer in chosen]
    settings = {"corpus": str(corpus.resolve()), "sha256": text.sha256, "model": embedder.fingerprint,
                "tokenizer": embedder.tokenizer_name, "window": window_of(embedder), "layers": names,
                "words_only": sorted(indexed) if indexed is not None else None}
    remove_partial_directories_of(out)  # an old index that a killed publish was deleting
    partial = layout.partial_directory(out)
    state = _PartialIndex(partial, settings, names, resume)
    report = IndexReport(resumed_from=state.progress["lines"])
    try:
        if not state.progress["embedded"]:
            # never more than the corpus: a huge batch_size would ask islice for more lines than it can count
            lines_per_checkpoint = min(checkpoint_lines or batch_size * CHECKPOINT_BATCHES, text.lines)
            _embed_corpus(corpus, state, embedder, chosen, indexed, batch_size, lines_per_checkpoint, progress,
                          report)
    finally:
        state.close()
    n_indexed = state.progress["indexed"]
    if n_indexed == 0:
        raise SearchError(f"{corpus}: no token to index" + (" among --words-only" if indexed is not None else ""),
                          "words_only" if indexed is not None else "corpus")
    if indexed is not None:
        unused = sorted(indexed - {word_key(word) for word in state.words})
        if unused:
            report.warnings.append(f"{len(unused)} of the {len(indexed)} words_only never occur as a token of "
                                   f"{corpus} ({', '.join(unused[:10])}{', ...' if len(unused) > 10 else ''}); a "
                                   f"word the tokenizer splits{_split_example(embedder)} never does")
    state.finish()
    for name in names:
        vectors = np.memmap(partial / layout.vectors_file(name), layout.VECTOR_DTYPE, "r",
                            shape=(n_indexed, embedder.dim))
        factory = ann.factory or default_factory(n_indexed, embedder.dim, ann)
        try:
            built = build_ann(vectors, ann)
        except RuntimeError as error:  # faiss's: e.g. fewer training vectors than an IVF factory has lists
            raise SearchError(f"faiss could not build --factory {factory!r} over the {n_indexed:,} indexed tokens "
                              f"of {name} ({faiss_reason(error)}); the embedded corpus is kept in {partial}: run "
                              "again with --resume and another --factory (Flat, or IVF with at most one list per 39 "
                              "tokens) to finish it without embedding again", "factory") from None
        write_ann(built, partial / layout.ann_file(name))
        report.factories[name] = factory
    meta = {"format": layout.FORMAT_VERSION, "model": model_name, "model_shipped": shipped,
            **{key: settings[setting] for setting, key in layout.SETTINGS_IN_META.items()},
            "n_layers": embedder.n_layers, "dim": embedder.dim, "n_sentences": state.progress["lines"],
            "n_tokens": state.progress["tokens"],
            "n_indexed": n_indexed, "n_words": len(state.words),
            "ann": {"factories": report.factories, "nprobe": ann.nprobe, "candidates": ann.candidates}}
    write_text_atomic(partial / layout.META, json.dumps(meta, indent=2))
    # From here meta.json, not progress.json, says the partial index is complete (a resumed build then only builds
    # the ANN index again and publishes), so the published index never holds progress.json.
    (partial / layout.PROGRESS).unlink(missing_ok=True)
    publish_directory(partial, out)
    report.sentences, report.tokens = meta["n_sentences"], meta["n_tokens"]
    report.indexed_tokens, report.words = n_indexed, meta["n_words"]
    for warning in report.warnings:
        log.warning(warning)
    return report


def _split_example(embedder: LayerEmbedder) -> str:
    """`` (don't -> don 't)`` as this index's tokenizer splits it, for the words_only warning (tokenizers split
    clitics differently, and a quoted split that is not this one misleads); empty where it keeps don't whole."""
    tokens = embedder.tokenize("don't")
    return f" (don't -> {' '.join(tokens)})" if len(tokens) > 1 else ""


def _check_out(out: Path) -> None:
    """Refuse, before any work, an ``out`` that is a symbolic link (``check_not_a_link``), a file or a directory
    holding something other than an index: publishing the index replaces the whole directory, built beside it first
    (its folder must take one), and refuses a link only after the whole build."""
    try:
        check_not_a_link(out)
    except ValueError as error:
        raise SearchError(str(error), "out") from None
    check_output_directory(out.parent, f"--out {out}: its folder")
    if out.is_file():
        raise SearchError(f"{out} is a file; the index is a directory (give a new path)", "out")
    if out.is_dir() and any(out.iterdir()) and not _holds_only_an_index(out):
        raise SearchError(f"{out} is a directory that holds something other than an index, which building the "
                          "index would replace; give a new or empty directory, or an index to rebuild", "out")


def _holds_only_an_index(directory: Path) -> bool:
    """Whether ``directory`` holds an index's files and nothing else, its ``meta.json`` one that an index of any
    format writes (an object with a ``format``: ``ContextIndex.load`` tells the holder of an earlier format to
    build it again, so that must be possible in place): a ``meta.json`` of something else beside other files is
    not an index to replace. A ``progress.json`` is one of its files too: earlier versions published the index
    with it and deleted it after, so a build killed between the two left it there."""
    try:
        meta = json.loads((directory / layout.META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and "format" in meta and \
        all(entry.is_file() and (layout.is_index_file(entry.name) or entry.name == layout.PROGRESS)
            for entry in directory.iterdir())


def _check_factory(factory: str, dim: int) -> None:
    """Refuse, before the corpus is embedded, a faiss factory string that faiss cannot build for vectors of ``dim``,
    or whose index cannot take plain vectors (``IDMap,Flat`` wants an id with each): the build adds the corpus's
    only after embedding it all. A trial index takes a few random vectors and a search; one that must be trained
    first goes as far as it can untrained (whether the corpus has tokens enough to train it shows only after the
    embedding)."""
    import faiss

    try:
        trial = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as error:
        raise SearchError(f"--factory {factory!r} is not a faiss index this build can make: {faiss_reason(error)}",
                          "factory") from None
    trial_vectors = unit_rows(np.random.default_rng(0).standard_normal((TRIAL_VECTORS, dim)))
    try:
        trial.add(trial_vectors)
        trial.search(trial_vectors, 1)
    except RuntimeError as error:
        reason = faiss_reason(error)
        if trial.is_trained or reason != UNTRAINED:
            raise SearchError(f"--factory {factory!r} makes a faiss index that cannot index the corpus's vectors: "
                              f"{reason}", "factory") from None


def _model_reference(model: str) -> tuple[str, bool]:
    """How ``meta.json`` names the model, and whether that is a shipped model's name: a model directory as an
    absolute path (the index may be queried from elsewhere); a shipped name as it is, marked shipped, so a query
    loads the shipped model even where the working directory holds a directory of that name (as it does an
    index built with ``--out en``)."""
    from elmo.model_dir import locate_model

    path = Path(model)
    located = locate_model(path)
    if located != path:
        return model, True
    return (str(path.resolve()) if path.is_dir() else model), False


def _embed_corpus(corpus: Path, state: _PartialIndex, embedder: LayerEmbedder, layers: Sequence[StoredLayer],
                  indexed: set[str] | None, batch_size: int, checkpoint_lines: int, progress: bool,
                  report: IndexReport) -> None:
    with corpus.open("rb") as handle:
        total = sum(1 for _ in handle)
    read_report = EmbedReport()
    lines = read_lines(corpus, read_report)
    done = sum(1 for _ in itertools.islice(lines, state.progress["lines"]))
    bar = tqdm(total=total, initial=done, unit=" sentences", desc="indexing", disable=not progress)
    # Each line is stored as cleaned and split as cleaned, so splitting the stored text again gives the tokens
    # embedded (ContextIndex.occurrence), whether or not the embedder's tokenize cleans text itself.
    while texts := [clean_text(text) for text in itertools.islice(lines, checkpoint_lines)]:
        token_lists = [embedder.tokenize(text) for text in texts]
        for text, tokens, all_layers in zip(texts, token_lists, embedder.embed(token_lists, "all", batch_size),
                                            strict=True):
            state.add(text, tokens, all_layers, layers, indexed)
        state.checkpoint()
        bar.update(len(texts))
        bar.set_postfix(tokens=state.progress["tokens"])
    bar.close()
    state.progress["embedded"] = True
    state.checkpoint()
    report.warnings.extend(read_report.warnings)
