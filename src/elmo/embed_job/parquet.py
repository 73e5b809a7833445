"""Parquet output: the table of ``elmo.embed_job.arrow``, one row per line, one row group per chunk."""

from pathlib import Path

import pyarrow.parquet as pq

from elmo.embed_job.arrow import arrow_schema, lines_to_table, parquet_options
from elmo.embed_job.chunked import ChunkedWriter
from elmo.embed_job.layout import EmbeddedLine


class ParquetWriter(ChunkedWriter):
    extension = "parquet"

    def _write_chunk(self, lines: list[EmbeddedLine], path: Path) -> None:
        table = lines_to_table(lines, self.target.shape, self.target.with_ids)
        pq.write_table(table, path, **parquet_options(table.schema))

    def _count(self, path: Path) -> int:
        return pq.ParquetFile(path).metadata.num_rows

    def _join(self, chunks: list[Path], path: Path) -> None:
        schema = arrow_schema(self.target.shape, self.target.with_ids)
        with pq.ParquetWriter(path, schema, **parquet_options(schema)) as writer:
            for chunk in chunks:  # one chunk in memory at a time
                writer.write_table(pq.read_table(chunk, schema=schema))
