"""What `elmo embed`'s writers add to a run, measured in one process: `elmo embed`'s own loop (read, tokenize,
embed a chunk of lines at a time) with each format's writer (HDF5's and Parquet's chunks stored in line and on a
thread), against the same loop with a writer that discards the lines, alternating so that a shared host's drift
falls on all of them.

    python benchmarks/writer_overhead.py --input data/en/train.txt --lines 20000 [--model en] [--repeats 2]
        [--writers hdf5 parquet] [--scratch /dev/shm]

``--scratch`` puts the outputs (and their chunks) on another file system: in memory (tmpfs) the disk's
part of a writer's cost drops out. ``--chunks-in DIR`` adds a row, ``parquet, chunks in DIR``: Parquet with its
chunk files (the copy that lets a killed run resume) in DIR and its output where the others' are, paired with the
other rows in each repeat (an experiment: ``elmo embed`` keeps the chunks beside the output).

Overhead = a run's seconds / the discarding run's seconds of the same repeat - 1. Each run gets a freshly loaded
model (the token cache starts cold in every run) and its own output; loading is not timed. Before the repeats,
the loop and each writer run once on the input's first 50 lines, so that one-time costs (the process's first
embedding, Parquet's first use: 0.25-0.5 s) fall on no repeat. Whole-command runs (benchmarks/embed_scale.py)
compare against a bare run made minutes apart, which on a shared host moves by more than the writers cost.
"""

import argparse
import contextlib
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import torch
from _inputs import first_lines

from elmo.embed_job import chunked
from elmo.embed_job.job import (  # `elmo embed`'s loop
    EmbedOptions,
    _embed_lines,
    plan,
    spare_core,
    with_embedder,
    writer_class,
)
from elmo.embed_job.layout import EmbeddedLine, Target
from elmo.embed_job.source import EmbedReport, Source
from elmo.embedder import Embedder

# name: (output file, options, chunks stored on a thread)
RUNS = {"hdf5": ("out.hdf5", EmbedOptions(), False),
        "hdf5-thread": ("out.hdf5", EmbedOptions(), True),
        "parquet": ("out.parquet", EmbedOptions(), False),
        "parquet-thread": ("out.parquet", EmbedOptions(), True),
        "parquet-f16": ("f16.parquet", EmbedOptions(dtype="float16"), False),
        "parquet-f16-thread": ("f16.parquet", EmbedOptions(dtype="float16"), True),
        "parquet-mean": ("mean.parquet", EmbedOptions(pooling="mean"), False),
        "parquet-mean-thread": ("mean.parquet", EmbedOptions(pooling="mean"), True)}


class DiscardingWriter:
    """A writer that keeps nothing: the loop's own time."""

    def __init__(self, target: Target, resume: bool) -> None:
        self.done = 0

    def add(self, line: EmbeddedLine) -> None:
        pass

    def flush(self) -> None:
        pass

    def finish(self) -> None:
        pass

    def close(self) -> None:
        pass


def timed_run(text: Path, output: Path, options: EmbedOptions, model: str, discard: bool,
              on_thread: bool = False) -> tuple[float, int]:
    """Seconds of `elmo embed`'s loop and finish, and the tokens embedded."""
    embedder = Embedder.load(model)
    job = with_embedder(plan(Source(text, str(text)), output, options, embedder.bilm.config,
                             embedder.tokenizer_name), embedder)
    target = job.target
    report = EmbedReport(lines=target.lines)
    start = time.perf_counter()
    writer = (DiscardingWriter(target, False) if discard
              else writer_class(target.settings["format"], on_thread)(target, False))
    _embed_lines(job, embedder, writer, report, progress=False)
    writer.finish()
    seconds = time.perf_counter() - start
    output.unlink(missing_ok=True)
    return seconds, report.tokens


@contextlib.contextmanager
def chunks_in(folder: Path) -> Iterator[None]:
    """Chunked writers made inside put their chunk directory in ``folder`` instead of beside the output."""
    beside_output = chunked.partial_path
    chunked.partial_path = lambda output: folder / beside_output(Path(output)).name
    try:
        yield
    finally:
        chunked.partial_path = beside_output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True, help="text, one sentence a line")
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--model", default="en")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--writers", nargs="+", choices=list(RUNS), default=list(RUNS), metavar="WRITER",
                        help=f"the writers to time (default all: {', '.join(RUNS)})")
    parser.add_argument("--scratch", type=Path, help="folder for the outputs (default: the system's temporary folder)")
    parser.add_argument("--chunks-in", type=Path, help="also time Parquet with its chunk files in this folder")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    writer_class("parquet")  # pyarrow's import is start-up, not writing

    elsewhere = f"parquet, chunks in {args.chunks_in}"
    overheads: dict[str, list[float]] = {name: [] for name in args.writers}
    if args.chunks_in:
        overheads[elsewhere] = []
    discarding: list[float] = []
    with tempfile.TemporaryDirectory(prefix="writer-overhead-", dir=args.scratch) as scratch:
        text = Path(scratch) / "in.txt"
        lines = first_lines(args.input, args.lines, text)
        # The process's first embedding pays a one-time cost (~0.2 s), and each writer its first use (Parquet's
        # 0.25-0.5 s); untimed here, they would land on the first repeat's first runs.
        warm_up = Path(scratch) / "warm-up.txt"
        first_lines(args.input, 50, warm_up)
        timed_run(warm_up, Path(scratch) / "warm-up.hdf5", EmbedOptions(), args.model, discard=True)
        for name in args.writers:
            file_name, options, on_thread = RUNS[name]
            timed_run(warm_up, Path(scratch) / f"warm-up-{file_name}", options, args.model, False, on_thread)
        if args.chunks_in:
            with chunks_in(args.chunks_in):
                timed_run(warm_up, Path(scratch) / "warm-up-elsewhere.parquet", EmbedOptions(), args.model, False)
        for _ in range(args.repeats):
            base, tokens = timed_run(text, Path(scratch) / "none.hdf5", EmbedOptions(), args.model, discard=True)
            discarding.append(base)
            for name in args.writers:
                file_name, options, on_thread = RUNS[name]
                seconds, _ = timed_run(text, Path(scratch) / file_name, options, args.model, False, on_thread)
                overheads[name].append(seconds / base - 1)
            if args.chunks_in:
                with chunks_in(args.chunks_in):
                    seconds, _ = timed_run(text, Path(scratch) / "elsewhere.parquet", EmbedOptions(), args.model, False)
                overheads[elsewhere].append(seconds / base - 1)
    print(f"{len(lines)} lines, {tokens} tokens, model {args.model}, {args.threads} threads (elmo embed would "
          f"store on a thread: {spare_core(Embedder.load(args.model))}); the loop without "
          f"writing: {', '.join(f'{s:.1f}' for s in discarding)} s ({tokens / min(discarding):,.0f} tokens/s at best)")
    print(f"{'writer':22} {'overhead per repeat':>24} {'median':>8}")
    for name, values in overheads.items():
        print(f"{name:22} {', '.join(f'{v:+.1%}' for v in values):>24} {statistics.median(values):+8.1%}")


if __name__ == "__main__":
    main()
