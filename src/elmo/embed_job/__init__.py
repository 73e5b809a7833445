"""``elmo embed``: sentences from a file (text or JSON lines, or standard input) -> vectors in HDF5
(AllenNLP's layout), Parquet or npy; atomic, resumable, and shardable across processes and machines.

- ``source.py``: the input, checked line by line before any work;
- ``shards.py``: which lines a worker embeds, and the directory of parts with its manifest;
- ``settings.py``: what a run records with its output (the model by its fingerprint) and the one check of it;
- ``layout.py``: formats, one embedded line, the writer's interface; ``arrow.py``: the Parquet schema and
  ``lines_to_table`` (the ``parquet`` extra);
- ``hdf5.py``, ``parquet.py``, ``npy.py`` (all three on ``chunked.py``): one writer per format;
- ``job.py``: ``plan`` (every check) and ``run``; ``commands.py``: the subcommand;
- ``ray_data.py``: the same lines on Ray Data workers (``--engine ray``, the ``ray`` extra).

The names load on first use, so registering the subcommand does not import PyTorch.
"""

from typing import TYPE_CHECKING

from elmo.lazy import lazy_exports

__all__ = ["EmbedOptions", "EmbeddedLine", "Shard", "VectorShape", "arrow_schema", "embed_file", "lines_to_table",
           "plan", "run", "shard_from_environment"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "elmo.embed_job.arrow": ("arrow_schema", "lines_to_table"),
    "elmo.embed_job.job": ("EmbedOptions", "embed_file", "plan", "run"),
    "elmo.embed_job.layout": ("EmbeddedLine", "VectorShape"),
    "elmo.embed_job.shards": ("Shard", "shard_from_environment"),
})

if TYPE_CHECKING:
    from elmo.embed_job.arrow import arrow_schema, lines_to_table
    from elmo.embed_job.job import EmbedOptions, embed_file, plan, run
    from elmo.embed_job.layout import EmbeddedLine, VectorShape
    from elmo.embed_job.shards import Shard, shard_from_environment
