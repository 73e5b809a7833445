"""What ``elmo embed`` writes, named once for its writers: the formats and their file extensions, one
embedded line, and the shape and dtype of its vectors.

Vectors of one line: ``(L+1, T, D)`` for ``--layers all``, ``(T, D)`` for one layer or a mix; pooling drops
the ``T`` axis: ``(L+1, D)`` or ``(D,)``.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple, Protocol, get_args

import numpy as np

from elmo.embed_job.source import SourceLine

Format = Literal["hdf5", "parquet", "npy"]
FORMATS: tuple[Format, ...] = get_args(Format)
EXTENSIONS: dict[str, Format] = {".hdf5": "hdf5", ".h5": "hdf5", ".parquet": "parquet", ".pq": "parquet",
                                 ".npy": "npy"}
DTYPES: dict[str, np.dtype] = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16)}


class EmbeddedLine(NamedTuple):
    # 0-based line number in the whole input. It hides tuple.index, which mypy calls an unsafe override; nothing
    # here calls that method, and ``index`` is the name the formats and Ray's rows use.
    index: int  # type: ignore[assignment]
    tokens: list[str]
    vectors: np.ndarray  # see the module docstring for its shape
    id: str | None = None


class VectorShape(NamedTuple):
    n_layers: int | None  # L+1 when every layer is kept; None for one layer or a mix
    dim: int
    pooled: bool
    dtype: np.dtype


def output_format(output: Path, given: str | None) -> Format:
    """``given`` (``--format``) or the one the output's extension names; HDF5 for any other name, as
    AllenNLP's ``elmo`` command writes whatever the name. ValueError when the two disagree."""
    inferred = EXTENSIONS.get(output.suffix.lower())
    if given is None:
        return inferred or "hdf5"
    chosen = next((name for name in FORMATS if name == given), None)
    if chosen is None:
        raise ValueError(f"format {given!r}: expected one of {', '.join(FORMATS)}")
    if inferred is not None and chosen != inferred:
        raise ValueError(f"--format {given} but {output.name} names a {inferred} file; change one of them")
    return chosen



def partial_path(output: Path) -> Path:
    """Where an output's chunks (``elmo.embed_job.chunked``) or Ray's part files are kept until it is whole: a
    directory."""
    return output.with_name(output.name + ".partial")


@dataclass(frozen=True)
class Target:
    """One output file to write, as its writer needs to know it."""

    output: Path
    settings: dict  # recorded in the output (``settings.py``; ``run`` adds the model); a resumed run must match them
    lines: int  # how many lines the output holds when whole
    shape: VectorShape
    with_ids: bool  # the input's ids are kept
    sentence_keys: bool  # HDF5 datasets are named by their sentences, not their line numbers
    source_lines: Callable[[], Iterator[SourceLine]]  # this output's input lines, read again from the start


class Writer(Protocol):
    """A format's writer. ``done`` lines were already written by an interrupted run and are kept."""

    done: int

    def add(self, line: EmbeddedLine) -> None: ...

    def flush(self) -> None:
        """Make every line added so far durable (an interrupt after this loses none of them), now or, for a
        writer that stores on a thread, by the time ``close`` or ``finish`` returns."""

    def finish(self) -> None:
        """Complete the output and move it to ``target.output`` in one rename."""

    def close(self) -> None: ...
