"""CPU time a writer of `elmo embed` spends per line, against the model's for the same lines: a measure that a shared
host's noise moves far less than wall-clock overheads (benchmarks/writer_overhead.py).

    python benchmarks/writer_cpu.py --input en-large/train.txt --lines 3000 [--model en] [--formats hdf5 parquet]

The lines are embedded once (all layers, float32, one thread; that CPU time is the model's), then written by each
format's writer in this process as `elmo embed` writes them (a flush after each chunk of batch size x bucket batches
lines, then finish; `elmo embed` also flushes within a chunk of very long lines, which these are not), `--repeats`
times; the best process CPU time of each (the kernel's part of writing included) is printed with its share of the
model's. Parquet stores its chunks in line here (no thread), so all of its work is counted.
"""

import argparse
import tempfile
import time
from pathlib import Path

import torch
from _inputs import first_lines

from elmo.embed_job.job import EmbedOptions, plan, with_embedder, writer_class
from elmo.embed_job.layout import EmbeddedLine
from elmo.embed_job.source import Source
from elmo.embedder import Embedder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True, help="text, one sentence a line")
    parser.add_argument("--lines", type=int, default=3000)
    parser.add_argument("--model", default="en")
    parser.add_argument("--formats", nargs="+", choices=["hdf5", "parquet"], default=["hdf5", "parquet"],
                        help="the formats that hold every token's vectors (npy holds pooled vectors only)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--scratch", type=Path, help="folder for the outputs (default: the system's temporary folder)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    embedder = Embedder.load(args.model)
    flush_every = EmbedOptions().batch_size * embedder.bucket_batches  # a chunk of elmo embed's, then a flush
    with tempfile.TemporaryDirectory(prefix="writer-cpu-", dir=args.scratch) as scratch:
        text = Path(scratch) / "in.txt"
        lines = first_lines(args.input, args.lines, text)
        sentences = [embedder.tokenize(line) for line in lines]
        start = time.process_time()
        vectors = list(embedder.iter_embed(sentences, "all", 32))
        model_cpu = time.process_time() - start
        tokens = sum(map(len, sentences))
        print(f"{len(lines)} lines, {tokens} tokens, model {args.model}: {model_cpu:.2f} s of CPU to embed them "
              "(one thread, all layers)")
        for format in args.formats:
            output = Path(scratch) / f"out.{format}"
            target = with_embedder(plan(Source(text, str(text)), output, EmbedOptions(), embedder.bilm.config,
                                        embedder.tokenizer_name), embedder).target
            make_writer = writer_class(format)  # Parquet's import of pyarrow is start-up, not writing
            best = float("inf")
            for _ in range(args.repeats):
                start = time.process_time()
                writer = make_writer(target, False)
                for index, (tokens_of_line, line_vectors) in enumerate(zip(sentences, vectors, strict=True)):
                    writer.add(EmbeddedLine(index, tokens_of_line, line_vectors, None))
                    if index % flush_every == flush_every - 1:
                        writer.flush()
                writer.flush()
                writer.finish()
                best = min(best, time.process_time() - start)
                output.unlink()
            print(f"{format:8} {best:.3f} s of CPU, {1e6 * best / len(lines):.0f} us a line, "
                  f"{100 * best / model_cpu:.1f} % of the model's")


if __name__ == "__main__":
    main()
