"""``elmo embed`` on Ray Data (the ``ray`` extra; docs/scale.md): Ray reads, batches and schedules, each worker
(an actor) loads the model once, and every batch of lines becomes rows of ``elmo embed``'s Parquet table
(``arrow_schema``), which Ray writes as a directory of Parquet files.

Ray is imported only when it is used, so the core install has no Ray. A dataset of lines has the columns
``index`` (int64, the line number: Ray does not number rows, so it is required), ``text`` (the sentence, for
the model's tokenizer) and optionally ``tokens`` (list<string>, used as given where not null, each
token cleaned as ``Embedder.tokenize`` cleans it) and ``id``
(string, kept with the vectors).
"""

import argparse
import json
import logging
import os
import shutil
import warnings
from collections.abc import Callable, Collection
from pathlib import Path
from types import ModuleType

import pyarrow as pa

from elmo.config import BiLMConfig
from elmo.embed_job.arrow import arrow_schema, lines_to_table, parquet_options
from elmo.embed_job.job import EmbedOptions, Job, check_input_unchanged, plan
from elmo.embed_job.layout import DTYPES, EXTENSIONS, EmbeddedLine, VectorShape, partial_path
from elmo.embed_job.settings import with_model
from elmo.embed_job.shards import WHOLE, shard_from_environment
from elmo.embed_job.source import EmbedReport, Source, read_source
from elmo.embedder import Embedder, cast_vectors
from elmo.extras import require
from elmo.files import publish_directory, write_text_atomic
from elmo.layer_choice import layer_weights
from elmo.model_dir import ModelDir
from elmo.pooling import check_pooling, pool

log = logging.getLogger(__name__)

LINE_COLUMNS = ("index", "text", "tokens", "id")
SETTINGS_FILE = "_settings.json"  # beside the parts; Parquet readers skip names that start with _
_BLOCK_LINES = 512  # lines per block of the input dataset: enough blocks to keep every worker busy
Loader = Callable[[str], Embedder]  # device -> embedder (``elmo embed``'s model options, loaded on a worker)


def import_ray() -> ModuleType:
    """``ray`` with Ray Data, or ``MissingExtra`` (an ImportError) with the one line that says how to install it."""
    require("ray", "the Ray engine")
    import ray
    import ray.data  # the engine needs Ray Data, not only Ray core

    return ray


class EmbedBatches:
    """The callable class for ``Dataset.map_batches(EmbedBatches, fn_constructor_kwargs={"model": ...,
    "options": ...}, batch_format="pyarrow", concurrency=N)``: Ray makes N of them, so the model loads once
    per worker. ``model`` is a model directory or shipped name (it must be readable where the workers run)
    or a function that loads the embedder on a device; only ``options``' layers, pooling, dtype and batch size
    apply."""

    def __init__(self, model: str | Loader, options: EmbedOptions, device: str = "cpu") -> None:
        self.embedder = Embedder.load(model, device=device) if isinstance(model, str) else model(device)
        self.options = options
        config = self.embedder.bilm.config
        weights = layer_weights(options.layers, config.n_output_layers)
        self.shape = VectorShape(config.n_output_layers if weights is None else None, config.output_dim,
                                 options.pooling is not None, DTYPES[options.dtype])

    def __call__(self, batch: pa.Table) -> pa.Table:
        """A batch of lines (the module's columns) -> the same lines as rows of ``arrow_schema``."""
        rows = batch.to_pydict()
        given = rows.get("tokens") or [None] * batch.num_rows
        token_lists = [self.embedder.tokenize(tokens if tokens is not None else text)
                       for text, tokens in zip(rows["text"], given, strict=True)]
        vectors = self.embedder.iter_embed(token_lists, self.options.layers, self.options.batch_size)
        ids = rows.get("id") or [None] * batch.num_rows
        lines = []
        for index, tokens, line_vectors, identifier in zip(rows["index"], token_lists, vectors, ids, strict=True):
            if self.options.pooling is not None:
                line_vectors = pool(line_vectors, self.options.pooling)
            line_vectors, problem = cast_vectors(line_vectors, self.shape.dtype)
            if problem is not None:  # Ray shows a worker's warnings on the driver's console
                warnings.warn(f"line {index}: vectors {problem}", RuntimeWarning, stacklevel=2)
            lines.append(EmbeddedLine(index, tokens, line_vectors, identifier))
        # lines_dataset always carries an id column; it holds ids only when the input named an --id-field.
        return lines_to_table(lines, self.shape, with_ids=any(identifier is not None for identifier in ids))


def embed_dataset(dataset, model: str | Loader, options: EmbedOptions,
                  workers: int = 1, gpus_per_worker: float = 0, config: BiLMConfig | None = None):
    """A Ray dataset of lines -> a lazy dataset of ``elmo embed``'s Parquet rows (``write_parquet`` it, or
    iterate), embedded by ``workers`` actors of ``gpus_per_worker`` GPUs each (one CPU each when 0). The
    columns and options are checked here, before any work; ``config`` is the model's, when ``model`` is a
    loader rather than a name."""
    columns = set(dataset.columns())
    missing = [name for name in ("index", "text") if name not in columns]
    if missing:
        raise ValueError(f"the dataset lacks the column(s) {', '.join(missing)}; expected {', '.join(LINE_COLUMNS)} "
                         "(index: the line number, which Ray does not keep)")
    if workers < 1:
        raise ValueError(f"workers is {workers}; expected at least 1")
    if config is None:
        if not isinstance(model, str):
            raise ValueError("model is a loader: pass its config too (the model's BiLMConfig), so the options are "
                             "checked before any worker loads it")
        config = BiLMConfig.load(ModelDir.find(model).options_file)
    layer_weights(options.layers, config.n_output_layers)
    check_pooling(options.pooling)
    if options.dtype not in DTYPES:
        raise ValueError(f"dtype {options.dtype!r}: expected one of {', '.join(DTYPES)}")
    device = "cuda" if gpus_per_worker > 0 else "cpu"  # Ray shows each worker only its own GPUs
    resources = {"num_gpus": gpus_per_worker} if gpus_per_worker > 0 else {"num_cpus": 1}
    return dataset.map_batches(EmbedBatches, fn_constructor_kwargs={"model": model, "options": options,
                                                                    "device": device},
                               batch_size=options.batch_size * 16, batch_format="pyarrow", concurrency=workers,
                               **resources)


def lines_dataset(source: Source, report: EmbedReport | None = None):
    """The input's lines as a Ray dataset with the module's columns. The driver reads the file (it need not
    be on the workers' disks) a block at a time into Ray's object store, so it never holds the whole text."""
    ray = import_ray()
    schema = pa.schema([pa.field("index", pa.int64(), nullable=False), ("text", pa.string()),
                        ("tokens", pa.list_(pa.string())), ("id", pa.string())])
    blocks, block = [], []
    for line in read_source(source, report or EmbedReport()):
        block.append(line)
        if len(block) == _BLOCK_LINES:
            blocks.append(ray.put(_lines_table(block, schema)))
            block = []
    if block:
        blocks.append(ray.put(_lines_table(block, schema)))
    return ray.data.from_arrow_refs(blocks)


def _lines_table(lines: list, schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pydict({"index": [line.index for line in lines], "text": [line.sentence for line in lines],
                                 "tokens": [line.tokens for line in lines], "id": [line.id for line in lines]},
                                schema=schema)


def embed_command(args: argparse.Namespace, source: Source, config: BiLMConfig, tokenizer: str,
                  load: Loader, model_files: Collection[Path] = ()) -> int:
    """``elmo embed --engine ray``: Parquet only, OUTPUT a directory written whole (under OUTPUT.partial, then
    renamed). Options that need a single writer or a launcher's shard are refused before any work."""
    refused = [name for name, given in (("--resume", args.resume), ("--shard", args.shard is not None),
                                        ("--use-sentence-keys", args.use_sentence_keys)) if given]
    if refused:
        raise ValueError(f"--engine ray does not take {', '.join(refused)}: Ray splits the lines itself and writes "
                         "the directory whole or not at all (docs/scale.md)")
    if shard_from_environment() is not None:
        raise ValueError("--engine ray runs once for the whole input, not under torchrun or a Slurm array (RANK or "
                         "SLURM_ARRAY_TASK_ID is set); use --engine local there")
    if args.format not in (None, "parquet"):
        raise ValueError(f"--engine ray writes parquet only, not {args.format}; use --engine local for {args.format}")
    if args.device is not None and not args.device.startswith(("cpu", "cuda")):
        raise ValueError(f"--engine ray runs its workers on cpu or cuda (a GPU each), not {args.device}; use --engine "
                         "local there")
    output = Path(args.output)
    named_file = not (args.output.endswith(("/", os.sep)) or output.is_dir())
    if named_file and EXTENSIONS.get(output.suffix.lower(), "parquet") != "parquet":
        raise ValueError(f"--engine ray writes a directory of Parquet files, and {output} names a "
                         f"{EXTENSIONS[output.suffix.lower()]} file: give a directory (use --engine local for "
                         f"{EXTENSIONS[output.suffix.lower()]})")
    # Before plan's refusal of what a run in parts does not write; hidden files (.DS_Store), which Parquet readers
    # skip, are let be as in a local run's parts directory.
    if output.is_dir() and any(not entry.name.startswith(".") for entry in output.iterdir()):
        raise ValueError(f"{output} is not empty; Ray would mix its files with what is there: remove it or name "
                         "another directory")
    options = EmbedOptions(layers=args.layers, pooling=args.pooling, dtype=args.dtype, format="parquet",
                           batch_size=args.batch_size, shard=WHOLE, parts=True)
    job = plan(source, output, options, config, tokenizer, model_files)  # model_files: what it must not replace
    ray = import_ray()  # a missing Ray is one line, after the options' refusals, before any work
    started = not ray.is_initialized()
    if started:
        ray.init()  # joins the cluster at RAY_ADDRESS, or of `ray start`, else starts one on this machine
    try:
        ray.data.DataContext.get_current().enable_progress_bars = not args.quiet
        files = _write(job, output, load, config, args.workers,
                       1 if (args.device or "cpu").startswith("cuda") else 0)
    finally:
        if started:
            ray.shutdown()
    print(f"wrote {job.target.lines} sentences to {output} ({files} Parquet files from {args.workers} Ray "
          f"worker(s))")
    return 0


def _write(job: Job, output: Path, load: Loader, config: BiLMConfig, workers: int, gpus_per_worker: int) -> int:
    """Embed the job's input into its directory ``output``; returns how many Parquet files Ray wrote."""
    partial = partial_path(output)
    if partial.exists():
        log.warning(f"{partial} is left from an interrupted run; starting over")
        shutil.rmtree(partial)
    workers_embedder = load("cpu")  # the workers' model, loaded here once more
    settings = with_model(job.target.settings, workers_embedder.fingerprint, workers_embedder.reading)
    report = EmbedReport()
    embedded = embed_dataset(lines_dataset(job.source, report), load, job.options, workers, gpus_per_worker, config)
    embedded.write_parquet(str(partial.resolve()),
                           **parquet_options(arrow_schema(job.target.shape, job.target.with_ids)))
    check_input_unchanged(job)
    write_text_atomic(partial / SETTINGS_FILE, json.dumps(settings, indent=1) + "\n")
    publish_directory(partial, output)  # onto an empty directory (checked before any work), or none
    for warning in report.warnings:  # the lines as the driver read them: empty ones, control characters
        log.warning(warning)
    return len(list(output.glob("*.parquet")))
