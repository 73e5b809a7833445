"""HDF5 output in AllenNLP's ``elmo`` command layout, so existing readers of it work.

One dataset per line, named by its 0-based line number (or, with ``sentence_keys``, by the sentence, as
``allennlp elmo --use-sentence-keys``), with the line's tokens as its string attribute ``tokens`` (and its
id as the string attribute ``id`` when the input's ids are kept); and,
unless the names are sentences, ``sentence_to_index``: a one-element string dataset holding JSON
``{sentence: "line number"}``.

The file is written as ``OUTPUT.partial`` and renamed when complete. It records the run's settings (with
the sha256 of the input) and ``lines_done`` (set after each flushed chunk, and to the last whole line when
Ctrl-C or SIGTERM stops the run). A resumed run continues from there when the settings match, refuses
when they do not, and starts over, saying why, when a killed run left a file that HDF5 cannot read or that
lacks a line it claims (a kill can land anywhere, also inside HDF5's own writes).
"""

import itertools
import json
import logging
from pathlib import Path

import h5py
import numpy as np

from elmo.embed_job.layout import EmbeddedLine, Target, partial_path
from elmo.embed_job.settings import check_same, parse_recorded
from elmo.embed_job.source import sentence_key
from elmo.files import publish_file

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


class Hdf5Writer:
    def __init__(self, target: Target, resume: bool) -> None:
        self.target = target
        self.partial = partial_path(target.output)
        self.out, self.done = self._open(resume)
        # The input lines still to come, read alongside: a dataset's name may be its sentence.
        self._unwritten = itertools.islice(target.source_lines(), self.done, None)

    def _key(self, index: int, sentence: str) -> str:
        return sentence_key(sentence) if self.target.sentence_keys else str(index)

    def _open(self, resume: bool) -> tuple[h5py.File, int]:
        """The partial file to continue and how many lines it holds, or a new one and 0."""
        if resume and self.partial.exists():
            try:
                out = h5py.File(self.partial, "a", libver=_LIBVER)  # as it was made: long lines' tokens fit
            except OSError as error:
                log.warning(f"{self.partial} cannot be read (a run killed as it began leaves such a file: {error}); "
                            "starting over")
            else:
                try:
                    done = self._lines_to_keep(out)
                except BaseException:
                    out.close()
                    raise
                if done is not None:
                    return out, done
                out.close()
        out = h5py.File(self.partial, "w", libver=_LIBVER)
        out.attrs["settings"] = json.dumps(self.target.settings)
        out.attrs["lines_done"] = 0
        return out, 0

    def _lines_to_keep(self, out: h5py.File) -> int | None:
        """How many lines of ``out`` a resumed run keeps, after deleting any written past them; None when the
        file is damaged. Raises ValueError when it was made from another input, with other options or by another
        model."""
        try:
            recorded = parse_recorded(out.attrs["settings"])
            done = int(out.attrs["lines_done"])
            names = set(out)
        except Exception as error:  # whatever HDF5 reports, the file is of no use
            log.warning(f"{self.partial} is damaged ({type(error).__name__}: {error}); starting over")
            return None
        if "sha256" not in recorded:
            raise ValueError(f"{self.partial} was begun by an older version that kept no hash of its input; run "
                             "without --resume to start over")
        check_same(recorded, self.target.settings, self.partial, "run without --resume to start over")
        keep = {self._key(line.index, line.sentence)
                for line in itertools.islice(self.target.source_lines(), max(done, 0))}
        if not 0 <= done <= self.target.lines or not keep <= names:
            log.warning(f"{self.partial} claims {done} lines done but lacks some of them; starting over")
            return None
        try:
            for name in names - keep:  # lines written after the last recorded flush may be incomplete
                del out[name]
        except Exception as error:  # damage HDF5 finds only as it rewrites the group
            log.warning(f"{self.partial} is damaged ({type(error).__name__}: {error}); starting over")
            return None
        return done

    def add(self, line: EmbeddedLine) -> None:
        source = next(self._unwritten)
        if source.index != line.index:
            raise ValueError(f"line {line.index} given where line {source.index} comes next")
        dataset = _write_dataset(self.out, self._key(source.index, source.sentence), line.vectors, line.tokens)
        if line.id is not None:
            h5py.Dataset(dataset).attrs["id"] = line.id
        self.done += 1  # only after the dataset is whole: an interrupt before this line redoes it

    def flush(self) -> None:
        if not self.out:  # closed by ``finish``
            return
        self.out.attrs["lines_done"] = self.done
        self.out.flush()

    def finish(self) -> None:
        if not self.target.sentence_keys:
            # The layout's index of every sentence: the one part that grows with the input (text, not vectors).
            sentence_to_index = {sentence_key(line.sentence): str(line.index) for line in self.target.source_lines()}
            self.out.create_dataset("sentence_to_index", data=[json.dumps(sentence_to_index)],
                                    dtype=h5py.string_dtype())
        self.out.close()
        publish_file(self.partial, self.target.output)

    def close(self) -> None:
        self.out.close()


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
