"""HDF5 output in AllenNLP's ``elmo`` command layout, so existing readers of it work.

One dataset per line, named by its 0-based line number (or, with ``sentence_keys``, by the sentence, as
``allennlp elmo --use-sentence-keys``), with the line's tokens as its string attribute ``tokens`` (and its
id as the string attribute ``id`` when the input's ids are kept); and,
unless the names are sentences, ``sentence_to_index``: a one-element string dataset holding JSON
``{sentence: "line number"}``. The file's attribute ``settings`` holds the run's settings (with the sha256 of
the input).

HDF5 rewrites its own structures in place as a file grows, so a process killed inside HDF5's writes can leave a
file HDF5 cannot read at all: written in place, a killed run could lose every line it had embedded. The lines
therefore go through ``elmo.embed_job.chunked``: each chunk is a small HDF5 file in this layout (datasets named
by line number), written whole and renamed, and the output is built beside them by copying their datasets in
order (``H5Ocopy``: HDF5 copies the vectors and attributes itself; writing one array of the chunk's lines instead
and cutting the datasets from it cost more). A kill loses at most the chunk in progress; a resumed run builds the
output again from the chunks.
"""

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np

from elmo.embed_job.chunked import ChunkedWriter, DamagedChunkError
from elmo.embed_job.layout import EmbeddedLine
from elmo.embed_job.settings import parse_recorded
from elmo.embed_job.source import SourceLine, sentence_key

log = logging.getLogger(__name__)

# HDF5 1.8's file format: attributes over 64 KiB (a long line's tokens) need its dense attribute storage,
# and every HDF5 library since 2008 reads it.
_LIBVER = ("v108", "v108")
# The vectors' types as ``create_dataset`` stores them, made once instead of once a line.
_FILE_TYPES = {np.dtype(dtype): h5py.h5t.py_create(np.dtype(dtype)) for dtype in (np.float16, np.float32)}
# A line's tokens: variable-length UTF-8 strings, the type h5py gives ``h5py.string_dtype()``.
_TOKENS_TYPE = h5py.h5t.py_create(h5py.string_dtype(), logical=True)
# A line's dataset as ``create_dataset`` makes it: no creation and modification times (the file's bytes then
# depend on its contents only).
_DATASET_CREATION = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
_DATASET_CREATION.set_obj_track_times(False)


class Hdf5Writer(ChunkedWriter):
    chunk_extension = "h5"
    _output: h5py.File | None = None
    _sources: Iterator[SourceLine]  # the input lines whose datasets are copied next, read alongside

    def _write_chunk(self, lines: list[EmbeddedLine], path: Path) -> None:
        with h5py.File(path, "w", libver=_LIBVER) as chunk:
            for line in lines:
                dataset = _write_dataset(chunk, str(line.index), line.vectors, line.tokens)
                if line.id is not None:
                    h5py.Dataset(dataset).attrs["id"] = line.id

    def _count(self, path: Path) -> int:
        with h5py.File(path, "r") as chunk:
            return len(chunk)

    def _open_output(self, path: Path) -> None:
        self._output = h5py.File(path, "w", libver=_LIBVER)
        self._output.attrs["settings"] = json.dumps(self.target.settings)
        self._sources = self.target.source_lines()

    def _append(self, chunk: Path) -> None:
        assert self._output is not None, "_open_output comes first"
        with h5py.File(chunk, "r") as lines:
            for _ in range(len(lines)):
                source = next(self._sources)  # a dataset's name in the output may be its sentence
                name = sentence_key(source.sentence) if self.target.sentence_keys else str(source.index)
                try:
                    h5py.h5o.copy(lines.id, str(source.index).encode(), self._output.id, name.encode())
                except RuntimeError as error:  # HDF5's error for a failed copy, whichever file it failed on
                    if not _readable(lines, str(source.index)):
                        raise DamagedChunkError(f"{chunk.name}: line {source.index} cannot be read: {error}") from error
                    # The chunk is whole, so writing the output failed: a full disk, say. An OSError, as writing
                    # the chunk would raise, so that the run says how many lines are kept.
                    raise OSError(f"line {source.index} could not be added to the output: {error}") from error

    def _close_output(self, complete: bool) -> None:
        if self._output is None:
            return
        output, self._output = self._output, None
        try:
            if complete and not self.target.sentence_keys:
                # The layout's index of every sentence: the one part that grows with the input (text, not vectors).
                sentence_to_index = {sentence_key(line.sentence): str(line.index)
                                     for line in self.target.source_lines()}
                output.create_dataset("sentence_to_index", data=[json.dumps(sentence_to_index)],
                                      dtype=h5py.string_dtype())
        finally:
            output.close()


def _readable(chunk: h5py.File, name: str) -> bool:
    """Whether line ``name``'s dataset and its attributes read back from ``chunk``."""
    try:
        dataset = chunk[name]
        dataset[...]
        dict(dataset.attrs)
    except Exception:  # whatever HDF5 reports, the line cannot be read
        return False
    return True


def recorded_settings(path: Path) -> dict | None:
    """The settings a whole output of this writer records (its ``settings`` attribute); None for a file that
    records none or cannot be read (another program's HDF5, or not HDF5)."""
    try:
        with h5py.File(path, "r") as out:
            return parse_recorded(out.attrs["settings"])
    except Exception:  # whatever h5py or JSON reports, the file records no settings this writer can read
        return None


def _write_dataset(out: h5py.File, name: str, vectors: np.ndarray, tokens: list[str]) -> h5py.h5d.DatasetID:
    """``out[name] = vectors`` with the attribute ``tokens``, through h5py's low-level calls: the same file as
    ``create_dataset`` and ``attrs.create`` make, whose checking and converting of their arguments, once per line,
    was a quarter of the writer's CPU time (docs/scale.md). ``name`` holds no ``/`` (``elmo.embed_job.source``
    refuses such sentence keys)."""
    vectors = np.ascontiguousarray(vectors)
    dataset = h5py.h5d.create(out.id, name.encode(), _FILE_TYPES[vectors.dtype],
                              h5py.h5s.create_simple(vectors.shape), dcpl=_DATASET_CREATION)
    dataset.write(h5py.h5s.ALL, h5py.h5s.ALL, vectors)
    attribute = h5py.h5a.create(dataset, b"tokens", _TOKENS_TYPE, h5py.h5s.create_simple((len(tokens),)))
    attribute.write(np.array(tokens, dtype=h5py.string_dtype()))
    return dataset  # the low-level identifier: h5py's Dataset object around it cost 5 % of the writer's time
