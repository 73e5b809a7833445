"""How fast the Parquet writer encodes embedded lines with ``elmo.embed_job.arrow.parquet_options`` against
pyarrow's defaults and against a dictionary for the tokens only (the options before the vectors' compression
and statistics were turned off), side by side in one process: the part of ``elmo embed``'s Parquet overhead
that the options decide (docs/scale.md).

Usage: python benchmarks/parquet_encoding.py [--lines 1000] [--tokens 25] [--dim 256] [--repeats 5]

Synthetic lines: every layer of ``--dim`` (the shipped en model's is 256), normal random floats (as incompressible
as real vectors), ``--tokens`` tokens each. Encoding goes to memory, so the disk does not enter; the best of
``--repeats`` runs is reported.
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
    words = [f"word{k}" for k in range(args.tokens)]
    lines = [EmbeddedLine(index, words, generator.standard_normal((3, args.tokens, args.dim)).astype(np.float32))
             for index in range(args.lines)]
    n_tokens = args.lines * args.tokens
    print(f"{args.lines} lines x {args.tokens} tokens, 3 layers x {args.dim}; best of {args.repeats}")
    print(f"{'dtype':8} {'options':38} {'ms':>7} {'tokens/s':>10} {'bytes/token':>11} {'x today':>8}")
    for dtype in ("float32", "float16"):
        table = lines_to_table(lines, VectorShape(3, args.dim, False, np.dtype(dtype)))
        choices = {"pyarrow defaults": {},
                   "dictionary for the tokens only": {"use_dictionary": ["tokens.list.element"]},
                   "today's parquet_options": parquet_options(table.schema)}
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
