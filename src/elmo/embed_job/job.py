"""One embedding job: an input, its shard, an output in one format. ``plan`` checks everything that can be
checked without the model's weights (so a mistake costs no time and leaves no file); ``run`` records the
model's fingerprint in the job's settings, so that a resumed run or a restarted shard keeps only what this
model made, and embeds the lines a chunk at a time into the format's writer, which keeps what is done when
the run is interrupted.
"""

import itertools
import logging
import math
import os
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from elmo.config import BiLMConfig
from elmo.embed_job import hdf5
from elmo.embed_job.layout import DTYPES, EmbeddedLine, Target, VectorShape, Writer, output_format, partial_path
from elmo.embed_job.npy import NpyWriter
from elmo.embed_job.settings import check_same, with_model
from elmo.embed_job.shards import WHOLE, PartsDirectory, Shard
from elmo.embed_job.source import STDIN, EmbedReport, Source, check_source, read_source
from elmo.embedder import Embedder, cast_vectors
from elmo.extras import require
from elmo.files import check_not_an_input, partial_files_of, same_path, sha256_of
from elmo.layer_choice import LayerChoice, layer_weights, parse_layers
from elmo.pooling import Pooling, check_pooling, pool

log = logging.getLogger(__name__)

_FORMAT_NAMES = {"hdf5": "HDF5", "parquet": "Parquet", "npy": "npy"}


@dataclass(frozen=True)
class EmbedOptions:
    layers: LayerChoice = "all"  # elmo.layer_choice
    pooling: Pooling | None = None  # sentence vectors instead of token vectors
    dtype: str = "float32"  # or float16
    format: str | None = None  # None: from the output's extension (see ``output_format``)
    batch_size: int = 32
    sentence_keys: bool = False  # HDF5 datasets named by their sentences (AllenNLP's --use-sentence-keys)
    shard: Shard = WHOLE
    parts: bool = False  # the output is a directory of parts, one per shard, and a manifest


@dataclass(frozen=True)
class Job:
    source: Source
    options: EmbedOptions
    target: Target
    parts: PartsDirectory | None  # where the part and its record go, when the output is a directory of parts


def plan(source: Source, output: str | Path, options: EmbedOptions, config: BiLMConfig, tokenizer: str,
         model_files: Collection[Path] = ()) -> Job:
    """Every check before the model loads: the options, the input (every line), the output. ValueError or
    FileNotFoundError naming the fault. ``model_files``: the files of the model to be loaded (its options,
    weights, vocabulary...), which the output must not replace, nor, as a directory of parts, be written among.
    The job's settings name the model once ``run`` has it."""
    output = Path(output)
    inputs = [*([] if source.name == STDIN else [source.path]), *model_files]
    check_not_an_input(output, inputs, "OUTPUT")
    weights = layer_weights(options.layers, config.n_output_layers)
    if options.batch_size < 1:
        raise ValueError(f"batch_size is {options.batch_size}; expected at least 1")
    check_pooling(options.pooling)
    if options.dtype not in DTYPES:
        raise ValueError(f"dtype {options.dtype!r}: expected one of {', '.join(DTYPES)}")
    if source.id_field is not None and source.text_field is None:
        raise ValueError("--id-field names a field of JSON lines: give --text-field too")
    format = output_format(output, options.format)  # a directory of parts too: out.parquet/ holds Parquet parts
    if format == "npy" and options.pooling is None:
        raise ValueError("npy holds one (N, D) array, so it needs --pooling mean, max, first or last; for every "
                         "token's vectors write hdf5 or parquet")
    if format == "npy" and source.id_field is not None:
        raise ValueError("npy keeps vectors only, not --id-field; write hdf5 or parquet to keep ids")
    if format == "parquet":
        require("parquet", "Parquet output")
    if options.sentence_keys and format != "hdf5":
        raise ValueError(f"--use-sentence-keys names HDF5 datasets; it does not apply to {format}")
    text = check_source(source, options.sentence_keys)
    settings = {"input": STDIN if source.name == STDIN else str(source.path.resolve()), "sha256": text.sha256,
                "format": format, "text_field": source.text_field, "id_field": source.id_field,
                "layers": parse_layers(options.layers),
                "pooling": options.pooling, "dtype": options.dtype, "sentence_keys": options.sentence_keys,
                "tokenizer": tokenizer, "shard": str(options.shard)}
    parts = None
    if options.parts:
        _check_output_directory(output)
        _check_not_the_model_directory(output, model_files)
        parts = PartsDirectory(output, format)
        parts.check_holds_only_parts(options.shard.count)
        output = parts.part(options.shard)
    check_output_path(output, format, parts is not None)
    _check_no_input_where_output_is_built(output, inputs)
    shape = VectorShape(config.n_output_layers if weights is None else None, config.output_dim,
                        options.pooling is not None, DTYPES[options.dtype])
    target = Target(output, settings, options.shard.size(text.lines), shape, source.id_field is not None,
                    options.sentence_keys, lambda: read_source(source, EmbedReport(), options.shard))
    return Job(source, options, target, parts)


def writer_class(format: str, on_thread: bool = False) -> Callable[[Target, bool], Writer]:
    """The writer of ``format``; Parquet's (pyarrow, the ``parquet`` extra) is imported only when asked for.
    ``on_thread``: the writer stores its chunks on a thread (``elmo.embed_job.chunked``)."""
    if format == "parquet":
        from elmo.embed_job.parquet import ParquetWriter

        return partial(ParquetWriter, on_thread=on_thread)
    return partial(NpyWriter if format == "npy" else hdf5.Hdf5Writer, on_thread=on_thread)


def spare_core(embedder: Embedder) -> bool:
    """Whether a writer's thread would run beside the model instead of taking a core from it: the model runs on
    a GPU, or on fewer CPU threads than this process's share of the cores (torchrun's processes on one machine
    share them). On 2 cores a thread beside a 1-thread model took Parquet's overhead from 22 % to 0 %; beside a
    2-thread model it gained nothing (benchmarks/writer_overhead.py; docs/scale.md)."""
    if embedder.device.type != "cpu":
        return True
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    processes_here = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    return torch.get_num_threads() < cores // max(processes_here, 1)


def check_output_path(output: str | Path, format: str = "hdf5", in_parts: bool = False) -> None:
    """Refuse an output that could not be written, before any work: a directory, a file in a folder that
    does not exist or cannot be written (checked already for a directory of parts)."""
    output = Path(output)
    if output.is_dir():
        raise ValueError(f"{output} is a directory; expected the name of the {_FORMAT_NAMES[format]} file to write")
    folder = output.parent
    if not in_parts and not folder.is_dir():
        if folder.exists():
            raise ValueError(f"{folder} is not a directory; cannot write {output.name} in it")
        raise FileNotFoundError(f"{folder}: no such directory to write {output.name} in")
    if not in_parts and not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"{folder} is not writable; cannot write {output.name} in it")


def _check_no_input_where_output_is_built(output: Path, inputs: list[Path]) -> None:
    """ValueError where an input stands where ``output`` is built (``partial_path``) or where a killed run's
    leftovers of it are deleted (``.NAME.*.partial`` beside it): a writer replaces or deletes them before the
    input is read, so the input would be lost and the run end with an unrelated error."""
    check_not_an_input(partial_path(output), inputs, "OUTPUT's partial output")
    for leftover in partial_files_of(output):
        check_not_an_input(leftover, inputs, "OUTPUT's leftover partial file (deleted before any work)")


def _check_output_directory(directory: Path) -> None:
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"{directory} is a file; expected a directory for the parts of a sharded run")
    writable = directory if directory.exists() else directory.parent
    if not writable.is_dir():
        raise FileNotFoundError(f"{writable}: no such directory to make {directory.name} in")
    if not os.access(writable, os.W_OK | os.X_OK):
        raise ValueError(f"{writable} is not writable; cannot write the parts in it")


def _check_not_the_model_directory(directory: Path, model_files: Collection[Path]) -> None:
    """ValueError when the directory of parts holds the model's files: the parts would be written among them
    (``PartsDirectory.check_holds_only_parts`` would refuse it too, but by advising to remove them)."""
    for folder in {model_file.parent for model_file in model_files}:
        if same_path(directory, folder):
            raise ValueError(f"OUTPUT {directory} is the directory of the model being read ({folder}): its parts "
                             "would be written among the model's files; give another directory")


def with_embedder(job: Job, embedder: Embedder) -> Job:
    """``job`` with its output's settings naming ``embedder``'s model and how it reads sentences (``with_model``):
    an output records what made it, so that only the same model, read the same way, resumes it."""
    settings = with_model(job.target.settings, embedder.fingerprint, embedder.reading)
    return replace(job, target=replace(job.target, settings=settings))


def run(job: Job, embedder: Embedder, resume: bool = False, progress: bool = True) -> EmbedReport:
    """Embed the job's lines into its output; ``resume`` keeps what an interrupted run of the same job by the
    same model wrote, and an output already whole is skipped (``report.already_whole``): a part of a directory of
    parts always, a single output file with ``resume`` when it records this job's settings (HDF5, Parquet; npy
    records none, so is embedded again). ValueError, naming what differs (both fingerprints for another model),
    when the partial or whole output kept was made otherwise. On Ctrl-C or SIGTERM (KeyboardInterrupt) every
    finished line is kept and a note says how many.
    ValueError, before any work, for a ``StatefulEmbedder`` asked to resume or to embed one shard of several: the
    state it would carry into the first line embedded is another run's, so the lines would not be one run's."""
    if embedder.carries_state and (resume or job.options.shard.count > 1):
        asked = "resume an output" if resume else f"embed shard {job.options.shard}"
        raise ValueError(f"a {type(embedder).__name__} cannot {asked}: it carries LSTM state from batch to batch, "
                         "and the state the lines before would have left is not recorded; embed the whole input in one "
                         "run without --resume, or use elmo.Embedder, where every sentence starts from a zero state")
    job = with_embedder(job, embedder)
    target = job.target
    report = EmbedReport(lines=target.lines)
    if job.parts is not None:
        # A part whose record was not written yet (the run stopped between the two) is whole if it records these
        # settings itself; its record is written below. One that records others is made again, as before.
        whole = job.parts.finished(job.options.shard, target.settings) or _recorded_whole(target) == target.settings
    else:
        whole = resume and _is_whole_output_of(target)
    if whole:
        report.resumed_from = target.lines
        report.already_whole = True
    else:
        target.output.parent.mkdir(exist_ok=True)
        if job.parts is not None:
            job.parts.reopen(job.options.shard)
        writer = writer_class(target.settings["format"], spare_core(embedder))(target, resume)
        report.resumed_from = writer.done
        try:
            _embed_lines(job, embedder, writer, report, progress)
            check_input_unchanged(job)
            writer.finish()
        # Ctrl-C, or SIGTERM under elmo.stop_signals.interruptible; a full disk, say: every line written so far is
        # kept, and a note says how many.
        except (KeyboardInterrupt, OSError) as stopped:
            try:
                writer.flush()
            except BaseException:  # the writer's own error (its thread's; the disk still full), or a second Ctrl-C,
                writer.close()  # ends the run instead, with no count: what was recorded is not known
                raise
            writer.close()  # counts the chunk the writer's thread was storing
            stopped.add_note(f"{partial_path(target.output)} holds the first {writer.done} of {target.lines} lines")
            raise
        except BaseException:
            writer.close()
            raise
        finally:  # also when stopped: a resumed run does not embed the kept lines again, so would never name them
            for warning in report.warnings:
                log.warning(warning)
    if job.parts is not None:
        job.parts.finish(job.options.shard, target.settings, target.lines)
    return report


def _is_whole_output_of(target: Target) -> bool:
    """Whether ``target.output`` is already whole, made by this job: no partial output is left (which a resumed run
    would continue) and the file records these settings. ValueError, naming what differs, for one that records
    others (another input, options or model), as a partial output of another job is refused."""
    recorded = _recorded_whole(target)
    if recorded is None:
        return False
    check_same(recorded, target.settings, target.output, "run without --resume to embed it again")
    return True


def _recorded_whole(target: Target) -> dict | None:
    """The settings ``target.output`` records where it is whole (no partial output beside it, which a resumed run
    would continue); None where it is not, or records none."""
    if partial_path(target.output).exists() or not target.output.is_file():
        return None
    return _recorded_settings(target.output, target.settings["format"])


def _recorded_settings(output: Path, format: str) -> dict | None:
    """The settings a whole output of ``format`` records; None where it records none (npy has no place for them;
    a file another program, or an older version, wrote)."""
    if format == "parquet":
        from elmo.embed_job import parquet  # pyarrow, the parquet extra, only when asked for

        return parquet.recorded_settings(output)
    return hdf5.recorded_settings(output) if format == "hdf5" else None


def check_input_unchanged(job: Job) -> None:
    """ValueError when the input's bytes are no longer those hashed before the run (rewritten or appended to while
    it was read): the output is left unfinished rather than published as the vectors of the text the run began
    with."""
    if sha256_of(job.source.path) != job.target.settings["sha256"]:
        raise ValueError(f"{job.source.name} changed while it was embedded (its sha256 is no longer the one taken "
                         f"before the run); {partial_path(job.target.output)} is left unfinished: run again without "
                         "--resume")


def _embed_lines(job: Job, embedder: Embedder, writer: Writer, report: EmbedReport, progress: bool) -> None:
    options, dtype = job.options, job.target.shape.dtype
    lines = read_source(job.source, report, options.shard)  # streamed: one chunk held at a time
    written = sum(1 for _ in itertools.islice(lines, writer.done))
    bar = tqdm(total=report.lines, initial=written, unit=" sentences", disable=not progress)
    chunk = options.batch_size * embedder.bucket_batches
    # Long documents: the writer is flushed once it holds as many tokens as the embedder holds at most, so that a
    # chunk of lines never holds all its lines' vectors at once (with a writer's thread, two such chunks). Pooled,
    # a line is one vector however long it is: the chunks stay whole.
    most_tokens = embedder.chunk_tokens(options.batch_size) if options.pooling is None else math.inf
    unflushed_tokens = 0
    try:
        while batch := list(itertools.islice(lines, chunk)):
            token_lists = [line.tokens if line.tokens is not None else embedder.tokenize(line.sentence)
                           for line in batch]
            vectors = embedder.iter_embed(token_lists, options.layers, options.batch_size)
            for line, tokens, line_vectors in zip(batch, token_lists, vectors, strict=True):
                if options.pooling is not None:
                    line_vectors = pool(line_vectors, options.pooling)
                writer.add(EmbeddedLine(line.index, tokens, _in_dtype(line_vectors, dtype, line.index, report),
                                        line.id))
                report.tokens += len(tokens)
                unflushed_tokens += len(tokens)
                if unflushed_tokens >= most_tokens:
                    writer.flush()
                    unflushed_tokens = 0
            writer.flush()
            unflushed_tokens = 0
            bar.update(len(batch))
            bar.set_postfix(tokens_per_s=f"{report.tokens / max(bar.format_dict['elapsed'], 1e-9):.0f}")
    finally:
        bar.close()


def _in_dtype(vectors: np.ndarray, dtype: np.dtype, index: int, report: EmbedReport) -> np.ndarray:
    """``vectors`` as ``dtype``; a warning naming the line where some are not finite (``cast_vectors``)."""
    cast, problem = cast_vectors(vectors, dtype)
    if problem is not None:
        report.warnings.append(f"line {index}: vectors {problem}")
    return cast


def embed_file(input_path: str | Path, output: str | Path, embedder: Embedder, options: EmbedOptions = EmbedOptions(),
               resume: bool = False, progress: bool = True, source: Source | None = None) -> EmbedReport:
    """A text file (or ``source``) -> ``output`` with ``embedder``: ``plan`` and ``run`` in one call."""
    source = source or Source(Path(input_path), str(input_path))
    job = plan(source, output, options, embedder.bilm.config, embedder.tokenizer_name)
    return run(job, embedder, resume, progress)
