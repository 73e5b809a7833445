"""npy output: one array of pooled sentence vectors, ``(N, D)``, or ``(N, L+1, D)`` for every layer; row k
is the k-th line of the output's input (for shard I/N, line I + k * N). Tokens and ids are not kept (use
HDF5 or Parquet for them); unpooled vectors, one ragged array per line, are refused before any work."""

from pathlib import Path

import numpy as np

from elmo.embed_job.chunked import ChunkedWriter
from elmo.embed_job.layout import EmbeddedLine


class NpyWriter(ChunkedWriter):
    chunk_extension = "npy"
    _output: np.memmap | None = None
    _rows = 0  # lines in the output so far

    def _write_chunk(self, lines: list[EmbeddedLine], path: Path) -> None:
        with path.open("wb") as handle:
            np.save(handle, np.stack([line.vectors for line in lines]).astype(self.target.shape.dtype, copy=False))

    def _count(self, path: Path) -> int:
        return np.load(path, mmap_mode="r").shape[0]

    def _open_output(self, path: Path) -> None:
        shape = self.target.shape
        row = (shape.dim,) if shape.n_layers is None else (shape.n_layers, shape.dim)
        self._output = np.lib.format.open_memmap(path, mode="w+", dtype=shape.dtype, shape=(self.target.lines, *row))
        self._rows = 0

    def _append(self, chunk: Path) -> None:
        assert self._output is not None, "_open_output comes first"
        rows = np.load(chunk)  # one chunk in memory at a time
        self._output[self._rows : self._rows + len(rows)] = rows
        self._rows += len(rows)

    def _close_output(self, complete: bool) -> None:
        if self._output is None:
            return
        output, self._output = self._output, None
        if complete and self._rows != self.target.lines:
            raise ValueError(f"the chunks hold {self._rows} lines; expected {self.target.lines}")
        output.flush()
        del output
