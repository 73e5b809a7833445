"""Resumable writing for formats that cannot be appended to in place (Parquet, npy): the lines go into
``OUTPUT.partial/``, a directory of chunk files, each written whole under a temporary name and renamed
(``chunk-000000.EXT``, ...), beside ``settings.json``. Joining the chunks into the output happens once every
line is there, again under a temporary name renamed onto OUTPUT, so a file at OUTPUT is always whole.

A kill anywhere loses at most the chunk being written. A resumed run keeps the chunks when the settings
match (refuses when they do not, as for HDF5) and starts over, saying why, when a chunk cannot be read.
"""

import glob
import json
import logging
import shutil
from abc import ABC, abstractmethod
from pathlib import Path

from elmo.embed_job.layout import EmbeddedLine, Target, partial_path
from elmo.embed_job.settings import check_same
from elmo.files import atomic_path, remove_stale_partials, write_text_atomic

log = logging.getLogger(__name__)

_SETTINGS = "settings.json"


class ChunkedWriter(ABC):
    chunk_extension: str  # of the chunk files (the output's own format or a faster one the join converts)

    def __init__(self, target: Target, resume: bool) -> None:
        self.target = target
        self.partial = partial_path(target.output)
        self.chunks: list[Path] = []
        resumed = self._resumed() if resume else None
        if resumed is None:
            self._start_over()
        self.done = resumed or 0
        self._pending: list[EmbeddedLine] = []

    @abstractmethod
    def _write_chunk(self, lines: list[EmbeddedLine], path: Path) -> None:
        """Write ``lines`` as one chunk file at ``path``."""

    @abstractmethod
    def _count(self, path: Path) -> int:
        """How many lines the chunk at ``path`` holds (reads only its header; raises if it is damaged)."""

    @abstractmethod
    def _join(self, chunks: list[Path], path: Path) -> None:
        """Write the output at ``path`` from the chunks, in order."""

    def _start_over(self) -> None:
        if self.partial.is_dir():
            shutil.rmtree(self.partial)
        else:
            self.partial.unlink(missing_ok=True)
        self.partial.mkdir()
        write_text_atomic(self.partial / _SETTINGS, json.dumps(self.target.settings, indent=1) + "\n")
        self.chunks = []

    def _resumed(self) -> int | None:
        """How many lines the chunks of an interrupted run hold; None to start over (no partial output, or a
        damaged one). Raises ValueError when it was made from another input, with other options or by another
        model."""
        try:
            recorded = json.loads((self.partial / _SETTINGS).read_text(encoding="utf-8"))
            if not isinstance(recorded, dict):
                raise TypeError(f"settings {recorded!r} are not a JSON object")
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError) as error:
            log.warning(f"{self.partial} is damaged ({type(error).__name__}: {error}); starting over")
            return None
        check_same(recorded, self.target.settings, self.partial, "run without --resume to start over")
        remove_stale_partials(self.partial)  # a chunk being written when the run was killed
        chunks = sorted(self.partial.glob(f"chunk-*.{self.chunk_extension}"))
        if [chunk.name for chunk in chunks] != [self._chunk_name(k) for k in range(len(chunks))]:
            log.warning(f"{self.partial} lacks a chunk ({', '.join(chunk.name for chunk in chunks)}); starting over")
            return None
        try:
            done = sum(self._count(chunk) for chunk in chunks)
        except Exception as error:  # whatever the format's reader says, the chunk is of no use
            log.warning(f"{self.partial} holds a damaged chunk ({type(error).__name__}: {error}); starting over")
            return None
        if done > self.target.lines:
            log.warning(f"{self.partial} holds {done} lines, more than the {self.target.lines} expected; starting over")
            return None
        self.chunks = chunks
        return done

    def _chunk_name(self, number: int) -> str:
        return f"chunk-{number:06d}.{self.chunk_extension}"

    def add(self, line: EmbeddedLine) -> None:
        self._pending.append(line)

    def flush(self) -> None:
        if not self._pending:
            return
        chunk = self.partial / self._chunk_name(len(self.chunks))
        with atomic_path(chunk) as temporary:
            self._write_chunk(self._pending, temporary)
        self.chunks.append(chunk)
        self.done += len(self._pending)
        self._pending = []

    def finish(self) -> None:
        self.flush()
        output = self.target.output
        for leftover in output.parent.glob(f".{glob.escape(output.name)}.*.partial"):  # from a join that was killed
            leftover.unlink(missing_ok=True)
        with atomic_path(self.target.output) as temporary:
            self._join(self.chunks, temporary)
        shutil.rmtree(self.partial)

    def close(self) -> None:
        self._pending = []
