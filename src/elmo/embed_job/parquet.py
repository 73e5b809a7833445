"""Parquet output: the table of ``elmo.embed_job.arrow``, one row per line, one row group per chunk.

The file's key-value metadata ``elmo.settings`` holds the run's settings (JSON, as HDF5's ``settings``
attribute), so that ``--resume`` knows a whole output of the same job.

The chunks of a run are Arrow IPC files, not Parquet: the output is built from them, read back memory-mapped
while they are still in the page cache, so the vectors are encoded as Parquet once instead of encoded for a
chunk, decoded and encoded again.
"""

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from elmo.embed_job.arrow import arrow_schema, lines_to_table, parquet_options
from elmo.embed_job.chunked import ChunkedWriter
from elmo.embed_job.layout import EmbeddedLine
from elmo.embed_job.settings import parse_recorded

SETTINGS_KEY = b"elmo.settings"


class ParquetWriter(ChunkedWriter):
    chunk_extension = "arrow"
    _output: pq.ParquetWriter | None = None

    def _write_chunk(self, lines: list[EmbeddedLine], path: Path) -> None:
        table = lines_to_table(lines, self.target.shape, self.target.with_ids)
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)

    def _count(self, path: Path) -> int:
        with pa.memory_map(str(path)) as source:
            reader = pa.ipc.open_file(source)
            return sum(reader.get_batch(k).num_rows for k in range(reader.num_record_batches))

    def _open_output(self, path: Path) -> None:
        schema = arrow_schema(self.target.shape, self.target.with_ids).with_metadata(
            {SETTINGS_KEY: json.dumps(self.target.settings)})
        self._output = pq.ParquetWriter(path, schema, **parquet_options(schema))

    def _append(self, chunk: Path) -> None:
        assert self._output is not None, "_open_output comes first"
        with pa.memory_map(str(chunk)) as source:  # mapped, not read into memory
            self._output.write_table(pa.ipc.open_file(source).read_all())

    def _close_output(self, complete: bool) -> None:
        if self._output is not None:
            output, self._output = self._output, None
            output.close()


def recorded_settings(path: Path) -> dict | None:
    """The settings a whole output of this writer records (``elmo.settings``); None for a file that records
    none or cannot be read (another program's Parquet, one an older version wrote, or not Parquet)."""
    try:
        return parse_recorded((pq.read_schema(path).metadata or {})[SETTINGS_KEY])
    except Exception:  # whatever pyarrow or JSON reports, the file records no settings this writer can read
        return None
