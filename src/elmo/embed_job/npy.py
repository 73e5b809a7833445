"""npy output: one array of pooled sentence vectors, ``(N, D)``, or ``(N, L+1, D)`` for every layer; row k
is the k-th line of the output's input (for shard I/N, line I + k * N). Tokens and ids are not kept (use
HDF5 or Parquet for them); unpooled vectors, one ragged array per line, are refused before any work."""

from pathlib import Path

import numpy as np

from elmo.embed_job.chunked import ChunkedWriter
from elmo.embed_job.layout import EmbeddedLine


class NpyWriter(ChunkedWriter):
    chunk_extension = "npy"

    def _write_chunk(self, lines: list[EmbeddedLine], path: Path) -> None:
        with path.open("wb") as handle:
            np.save(handle, np.stack([line.vectors for line in lines]).astype(self.target.shape.dtype, copy=False))

    def _count(self, path: Path) -> int:
        return np.load(path, mmap_mode="r").shape[0]

    def _join(self, chunks: list[Path], path: Path) -> None:
        shape = self.target.shape
        row = (shape.dim,) if shape.n_layers is None else (shape.n_layers, shape.dim)
        joined = np.lib.format.open_memmap(path, mode="w+", dtype=shape.dtype, shape=(self.target.lines, *row))
        start = 0
        for chunk in chunks:  # one chunk in memory at a time
            rows = np.load(chunk)
            joined[start : start + len(rows)] = rows
            start += len(rows)
        if start != self.target.lines:
            raise ValueError(f"the chunks hold {start} lines; expected {self.target.lines}")
        joined.flush()
        del joined
