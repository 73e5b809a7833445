"""Embedded lines as an Arrow table: the schema of ``elmo embed``'s Parquet output, for any writer of it
(the Parquet writer here, a distributed job's).

One row per line: ``index`` (int64, the 0-based line number), ``id`` (string; only when the input's ids are
kept), ``tokens`` (list<string>), then the vectors: one column ``vectors``, or ``layer_0`` .. ``layer_L`` for
every layer. A vector column holds, per row, a list of T fixed-size lists of D numbers (one per token) or,
pooled, one fixed-size list of D; float32 or float16 as asked.

Parquet dictionary-encodes, compresses (snappy) and keeps min/max statistics for every column unless told
otherwise. For vectors the dictionary and the statistics cost time for nothing (the writer builds a dictionary,
finds it too large and falls back, on every page; no one filters rows by one coordinate's range, and float16
statistics alone took 40 % of the encoding time). Contextual vectors do not compress; the context-free layer 0
does, as a word's vector repeats with the word. ``parquet_options`` says which column gets what; docs/scale.md
has the figures.
"""

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from elmo.embed_job.layout import EmbeddedLine, VectorShape


def arrow_schema(shape: VectorShape, with_ids: bool = False) -> pa.Schema:
    value = pa.float16() if shape.dtype == np.float16 else pa.float32()
    vector = pa.list_(value, shape.dim)
    column = vector if shape.pooled else pa.list_(vector)
    names = ["vectors"] if shape.n_layers is None else [f"layer_{k}" for k in range(shape.n_layers)]
    fields = [pa.field("index", pa.int64(), nullable=False)]
    if with_ids:
        fields.append(pa.field("id", pa.string()))
    fields.append(pa.field("tokens", pa.list_(pa.string())))
    return pa.schema(fields + [pa.field(name, column) for name in names])


def parquet_options(schema: pa.Schema) -> dict[str, Any]:
    """Keyword arguments for every Parquet writer of ``schema`` (``pyarrow.parquet.write_table``,
    ``ParquetWriter``, Ray's ``write_parquet``), by each column's leaf path (how Parquet names a nested column):
    a dictionary for the tokens only (index and ids are unique); snappy and statistics for all but the vectors.
    Contextual vectors do not compress and are written as they are; ``layer_0`` is context-free, so a word's
    vector repeats wherever the word does, and zstd shrinks it about 4x (docs/scale.md)."""
    leaves = {field.name: _leaf(field.name, field.type) for field in schema}
    vectors = {path for path, leaf_type in leaves.values() if pa.types.is_floating(leaf_type)}
    context_free = leaves["layer_0"][0] if "layer_0" in leaves else None
    return {"use_dictionary": [leaves["tokens"][0]] if "tokens" in leaves else [],
            "compression": {path: "zstd" if path == context_free else "none" if path in vectors else "snappy"
                            for path, _ in leaves.values()},
            "write_statistics": [path for path, _ in leaves.values() if path not in vectors]}


def _leaf(name: str, column_type: pa.DataType) -> tuple[str, pa.DataType]:
    """A column's path to its numbers or strings and their type: each list level (fixed-size or not) adds
    ``.list.element`` to the path."""
    while pa.types.is_list(column_type) or pa.types.is_fixed_size_list(column_type):
        name, column_type = f"{name}.list.element", column_type.value_type
    return name, column_type


def lines_to_table(lines: Sequence[EmbeddedLine | tuple], shape: VectorShape, with_ids: bool = False) -> pa.Table:
    """``(index, tokens, vectors[, id])`` per line -> a table with ``arrow_schema(shape, with_ids)``; the
    vectors' shape is checked against ``shape``, and cast to its dtype."""
    rows = [EmbeddedLine(*line) for line in lines]
    schema = arrow_schema(shape, with_ids)
    for line in rows:
        tokens = () if shape.pooled else (len(line.tokens),)
        expected = ((shape.n_layers,) if shape.n_layers is not None else ()) + tokens + (shape.dim,)
        if line.vectors.shape != expected:
            raise ValueError(f"line {line.index}: vectors of shape {line.vectors.shape}; expected {expected}")
    columns = [pa.array([line.index for line in rows], pa.int64())]
    if with_ids:
        columns.append(pa.array([line.id for line in rows], pa.string()))
    columns.append(pa.array([line.tokens for line in rows], pa.list_(pa.string())))
    if shape.n_layers is None:
        columns.append(_vector_column([line.vectors for line in rows], shape, schema.field("vectors").type))
    else:
        for k in range(shape.n_layers):
            columns.append(_vector_column([line.vectors[k] for line in rows], shape, schema.field(f"layer_{k}").type))
    return pa.Table.from_arrays(columns, schema=schema)


def _vector_column(arrays: list[np.ndarray], shape: VectorShape, column_type: pa.DataType) -> pa.Array:
    """Per row ``(T, D)`` (or pooled ``(D,)``) -> one Arrow column, built from one flat buffer (no Python
    loop over numbers)."""
    flat = np.concatenate([array.reshape(-1) for array in arrays]) if arrays else np.zeros(0)
    values = pa.array(flat.astype(shape.dtype, copy=False))
    vectors = pa.FixedSizeListArray.from_arrays(values, shape.dim)
    if shape.pooled:
        return vectors
    offsets = np.zeros(len(arrays) + 1, np.int32)
    np.cumsum([array.shape[0] for array in arrays], out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), vectors, type=column_type)
