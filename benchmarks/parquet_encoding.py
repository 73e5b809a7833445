"""How fast the Parquet writer encodes embedded lines with ``elmo.embed_job.arrow.parquet_options``, side by side
in one process, against pyarrow's defaults, a dictionary for the tokens only (the options before the vectors'
compression and statistics were turned off) and every vector uncompressed (before layer 0 took zstd): the part of
``elmo embed``'s Parquet overhead and size that the options decide (docs/scale.md).

Usage: python benchmarks/parquet_encoding.py [--lines 1000] [--tokens 25] [--dim 256] [--repeats 5]

Synthetic lines: ``--tokens`` words each, drawn from a Zipf law over 5,000 word types; every layer of ``--dim``
numbers (the shipped en model's is 256): layer 0 one random vector per word type (it is context-free, so a word's
vector repeats with the word), layers 1 and 2 random for every token (contextual vectors are as incompressible as
random floats). Encoding goes to memory, so the disk does not enter; the best of ``--repeats`` runs is reported.
"""

import argparse
import io
import time

import numpy as np
import pyarrow.parquet as pq

from elmo.embed_job.arrow import lines_to_table, parquet_options
from elmo.embed_job.layout import EmbeddedLine, VectorShape


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--tokens", type=int, default=25, help="tokens per line")
    parser.add_argument("--dim", type=int, default=256, help="numbers per vector")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    generator = np.random.default_rng(0)
    word_vectors = generator.standard_normal((5000, args.dim)).astype(np.float32)
    lines = []
    for index in range(args.lines):
        ids = np.minimum(generator.zipf(1.2, size=args.tokens), 5000) - 1
        vectors = generator.standard_normal((3, args.tokens, args.dim)).astype(np.float32)
        vectors[0] = word_vectors[ids]
        lines.append(EmbeddedLine(index, [f"word{k}" for k in ids], vectors))
    n_tokens = args.lines * args.tokens
    print(f"{args.lines} lines x {args.tokens} tokens, 3 layers x {args.dim}; best of {args.repeats}")
    print(f"{'dtype':8} {'options':38} {'ms':>7} {'tokens/s':>10} {'bytes/token':>11} {'x today':>8}")
    for dtype in ("float32", "float16"):
        table = lines_to_table(lines, VectorShape(3, args.dim, False, np.dtype(dtype)))
        today = parquet_options(table.schema)
        every_vector_plain = {**today, "compression": {path: "none" if path.startswith("layer_") else codec
                                                       for path, codec in today["compression"].items()}}
        choices = {"pyarrow defaults": {},
                   "dictionary for the tokens only": {"use_dictionary": ["tokens.list.element"]},
                   "every vector uncompressed (d3b2da8)": every_vector_plain,
                   "today's parquet_options": today}
        seconds: dict[str, float] = {}
        sizes: dict[str, int] = {}
        for name, options in choices.items():
            times = []
            for _ in range(args.repeats):
                buffer = io.BytesIO()
                start = time.perf_counter()
                pq.write_table(table, buffer, **options)
                times.append(time.perf_counter() - start)
            seconds[name], sizes[name] = min(times), len(buffer.getvalue())
        for name in choices:
            print(f"{dtype:8} {name:38} {seconds[name] * 1000:7.0f} {n_tokens / seconds[name]:10.0f} "
                  f"{sizes[name] / n_tokens:11.0f} {seconds[name] / seconds[next(reversed(choices))]:8.2f}")


if __name__ == "__main__":
    main()
