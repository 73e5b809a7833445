"""Resumable writing for every format (Parquet and npy cannot be appended to in place, and HDF5 appended to in
place can be left unreadable by a kill: ``hdf5.py``): the lines go into
``OUTPUT.partial/``, a directory of chunk files, each written whole under a temporary name and renamed
(``chunk-000000.EXT``, ...), beside ``settings.json``. The output is built from the chunks as they come, under a
temporary name beside it, and renamed onto OUTPUT once every line is in, so a file at OUTPUT is always whole.

With ``on_thread``, each chunk is written and added to the output on a thread while the model embeds the next
lines, so memory holds at most two chunks' vectors. That pays where the model leaves the CPU a core (it runs on a
GPU, or on fewer threads than there are cores) and costs where it does not (docs/scale.md); without it, the
same steps run one after another.

A kill anywhere loses at most the chunk being written (and the output being built, which a resumed run builds
again from the chunks before it embeds anything). A resumed run keeps the chunks when the settings match (refuses
when they do not) and starts over, saying why, when a chunk cannot be read. Once the output is renamed into place
the chunks' directory is moved aside and then deleted, so a kill cannot leave part of it under its own name.
"""

import json
import logging
import shutil
from abc import ABC, abstractmethod
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from elmo.embed_job.layout import EmbeddedLine, Target, partial_path
from elmo.embed_job.settings import check_same, parse_recorded
from elmo.files import (
    atomic_path,
    new_partial_file,
    publish_file,
    remove_directory,
    remove_partial_directories_of,
    remove_partial_files_of,
    remove_stale_partials,
    write_text_atomic,
)

log = logging.getLogger(__name__)

_SETTINGS = "settings.json"


class DamagedChunkError(Exception):
    """A stored chunk that cannot be read back (a format's ``_append`` tells it from a failure to write the
    output)."""


class ChunkedWriter(ABC):
    chunk_extension: str  # of the chunk files (the output's own format or a faster one to build it from)

    def __init__(self, target: Target, resume: bool, on_thread: bool = False) -> None:
        self.target = target
        self.on_thread = on_thread
        self.partial = partial_path(target.output)
        self.chunks: list[Path] = []
        resumed = self._resumed() if resume else None
        if resumed is None:
            if not resume:
                self._warn_of_chunks_dropped()
            self._start_over()
        # Lines in chunks on disk, whatever becomes of the output being built: a resumed run keeps them. Counted by
        # the thread that stores them; read once ``_wait`` has seen that thread's work end.
        self.done = resumed or 0
        self._pending: list[EmbeddedLine] = []
        # Set once the thread failed to store a chunk (or to add it to the output): no chunk may follow, or the chunks
        # on disk would skip that chunk's lines and a resumed run would take the lines after the gap for them.
        self._failed = False
        remove_partial_files_of(target.output)  # an output a killed run was building
        remove_partial_directories_of(target.output)  # chunks a killed run was deleting after it finished
        self._building = new_partial_file(target.output)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="elmo-embed-writer")
        self._in_hand: Future[None] | None = None
        self._rebuild()

    @abstractmethod
    def _write_chunk(self, lines: list[EmbeddedLine], path: Path) -> None:
        """Write ``lines`` as one chunk file at ``path``."""

    @abstractmethod
    def _count(self, path: Path) -> int:
        """How many lines the chunk at ``path`` holds (reads only its header; raises if it is damaged)."""

    @abstractmethod
    def _open_output(self, path: Path) -> None:
        """Start the output at ``path``, to which ``_append`` adds the chunks in order."""

    @abstractmethod
    def _append(self, chunk: Path) -> None:
        """Add the lines of the chunk at ``path`` to the output being built."""

    @abstractmethod
    def _close_output(self, complete: bool) -> None:
        """Close the output being built: whole when ``complete`` (every chunk appended), else only released."""

    def _rebuild(self) -> None:
        """Opens the output and adds the chunks of an interrupted run to it, on the calling thread, so that Ctrl-C
        stops it at once and a chunk found damaged only now (its lines counted, one of them unreadable) means
        starting over, as for any damaged chunk."""
        try:
            try:
                self._open_output(self._building)
                for chunk in self.chunks:
                    self._append(chunk)
            except DamagedChunkError as error:
                log.warning(f"{self.partial} holds a damaged chunk ({error}); starting over")
                self._drop_output()
                self._start_over()
                self.done = 0
                self._building = new_partial_file(self.target.output)
                self._open_output(self._building)
        except BaseException:
            self._thread.shutdown()
            self._drop_output()
            raise

    def _drop_output(self) -> None:
        """Closes and deletes the output being built (the chunks stay). An error closing it (a full disk) is only
        reported: the output is dropped anyway, and the run's own error is the one to raise."""
        try:
            self._close_output(complete=False)
        except Exception as error:
            log.warning(f"closing the unfinished {self._building.name} failed ({type(error).__name__}: {error})")
        finally:
            self._building.unlink(missing_ok=True)

    def _store(self, lines: list[EmbeddedLine], chunk: Path) -> None:
        # Not synced to the disk, which would cost time on every chunk: a chunk a power loss left short is
        # found damaged on resume, which then starts over.
        with atomic_path(chunk, durable=False) as temporary:
            self._write_chunk(lines, temporary)
        self.done += len(lines)
        self._append(chunk)

    def _wait(self) -> None:
        """Until the thread's work is done; its lines are then on disk. The thread's error is raised here, once; an
        interrupt while waiting leaves the work in hand, for ``close`` to wait for and count."""
        in_hand = self._in_hand
        if in_hand is None:
            return
        try:
            in_hand.result()
        except BaseException:
            if in_hand.done() and in_hand.exception() is not None:  # the thread's error, not one met while waiting
                self._in_hand = None
                self._failed = True
            raise
        self._in_hand = None

    def _warn_of_chunks_dropped(self) -> None:
        """A warning when a run without ``--resume`` finds an interrupted run's chunks, which it deletes: a retry
        that forgot the flag embedded everything again without a word."""
        if self.partial.is_dir() and (chunks := list(self.partial.glob(f"chunk-*.{self.chunk_extension}"))):
            log.warning(f"{self.partial} holds {len(chunks)} chunk(s) of an interrupted run; starting over without "
                        "them, as --resume was not given (with it, they are kept)")

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
        if self.partial.exists() and not self.partial.is_dir():
            log.warning(f"{self.partial} is a file, not a directory of chunks (an older version wrote HDF5's partial "
                        "output so); starting over")
            return None
        try:
            recorded = parse_recorded((self.partial / _SETTINGS).read_text(encoding="utf-8"))
        except FileNotFoundError:
            if self.partial.exists():  # a run killed before it recorded them, or a file removed since
                log.warning(f"{self.partial} lacks {_SETTINGS}; starting over")
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
        """Stores the lines added since the last flush, or with ``on_thread`` hands them to the thread once the
        chunk before them is stored. After a chunk failed to be stored, the lines are dropped (embedded again on
        resume)."""
        if self._failed:
            self._pending = []
        if not self._pending:
            return
        self._wait()
        # In this order an interrupt anywhere can only leave lines unstored (embedded again on resume), never
        # stored twice or a chunk number skipped.
        lines, self._pending = self._pending, []
        chunk = self.partial / self._chunk_name(len(self.chunks))
        self._in_hand = self._thread.submit(self._store, lines, chunk)
        self.chunks.append(chunk)
        if not self.on_thread:
            self._wait()

    def finish(self) -> None:
        self.flush()
        self._wait()
        self._thread.shutdown()
        self._close_output(complete=True)
        publish_file(self._building, self.target.output)  # on disk before the chunks it was built from go
        remove_directory(self.partial, self.target.output)

    def close(self) -> None:
        """Waits for the chunk in the thread's hands (so that ``done`` counts it), then drops the output being
        built; the chunks stay for a resumed run."""
        self._pending = []
        try:
            self._wait()
        except Exception as error:  # the run is ending on another error already; this one is only reported
            log.warning(f"the last chunk of {self.partial} was not stored ({type(error).__name__}: {error})")
        finally:
            self._thread.shutdown()
            self._drop_output()
