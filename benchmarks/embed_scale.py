"""Throughput of embedding a file, side by side in one run: the bare Embedder, ``elmo embed`` to each format, and
1 against 2 workers under torchrun and on Ray, on the same lines; the figures for docs/scale.md.

Usage: python benchmarks/embed_scale.py --input data/en/train.txt [--lines 20000] [--model en] [--threads N]
       [--price-per-hour 2.5]

Every run gets the same --threads CPU threads in all (2 workers: half each). tokens/s is the input's tokens over
the run's wall time; a command's time includes starting Python, loading the model and, for Ray, starting a
local cluster, which is what a user pays once per file. Each command is also run on the input's first line
alone: that start-up time subtracted, "less start-up" is the writer's steady rate, whose ratio to the bare
Embedder is the writer's overhead. bytes per token is the output's size over the tokens, to check
docs/scale.md's sizes computed from the format.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _inputs import first_lines

from elmo.embedder import Embedder


def run_command(name: str, command: list[str], threads: int, output: Path) -> tuple[str, float, int]:
    environment = {**os.environ, "OMP_NUM_THREADS": str(threads), "RAY_USAGE_STATS_ENABLED": "0"}
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=environment)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    size = sum(path.stat().st_size for path in output.rglob("*")) if output.is_dir() else output.stat().st_size
    return name, seconds, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="text, one sentence a line")
    parser.add_argument("--lines", type=int, default=20_000, help="the first this many lines of --input")
    parser.add_argument("--model", default="en")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="CPU threads for each run, in all")
    parser.add_argument("--price-per-hour", type=float, default=None, help="of the machine, for cost per 1e9 tokens")
    args = parser.parse_args()
    if args.threads < 2:
        sys.exit("--threads must be at least 2, to split between 2 workers")
    with tempfile.TemporaryDirectory(prefix="embed-scale-") as scratch:
        scratch = Path(scratch)
        text = scratch / "in.txt"
        lines = first_lines(args.input, args.lines, text)
        one_line = scratch / "one.txt"
        one_line.write_text(lines[0] + "\n", encoding="utf-8")

        os.environ["OMP_NUM_THREADS"] = str(args.threads)
        import torch

        torch.set_num_threads(args.threads)
        embedder = Embedder.load(args.model)
        start = time.perf_counter()
        tokens = sum(vectors.shape[1] for vectors in embedder.iter_embed(lines, "all"))
        results = [("bare Embedder (after loading)", time.perf_counter() - start, 0)]

        elmo = [sys.executable, "-m", "elmo", "embed", str(text)]
        model = ["--model", args.model, "--quiet"]
        torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
        runs = [
            ("elmo embed hdf5", [*elmo, str(scratch / "out.hdf5"), *model], args.threads, scratch / "out.hdf5"),
            ("elmo embed parquet", [*elmo, str(scratch / "out.parquet"), *model], args.threads,
             scratch / "out.parquet"),
            ("elmo embed parquet float16", [*elmo, str(scratch / "f16.parquet"), "--dtype", "float16", *model],
             args.threads, scratch / "f16.parquet"),
            ("elmo embed parquet, mean-pooled", [*elmo, str(scratch / "mean.parquet"), "--pooling", "mean", *model],
             args.threads, scratch / "mean.parquet"),
        ]
        for workers in (1, 2):
            output = scratch / f"torchrun-{workers}"
            runs.append((f"torchrun, {workers} worker(s)", [torchrun, "--standalone", "--nproc-per-node", str(workers),
                                                            *elmo[1:], f"{output}/", "--format", "parquet", *model],
                         args.threads // workers, output))
        for workers in (1, 2):
            output = scratch / f"ray-{workers}"
            command = [*elmo, str(output), "--engine", "ray", "--workers", str(workers), *model]
            runs.append((f"Ray, {workers} worker(s)", command, args.threads // workers, output))
        startup: dict[str, float] = {}
        for name, command, threads, output in runs:
            results.append(run_command(name, command, threads, output))
            alone = scratch / f"alone-{output.name}"
            command = [str(one_line) if part == str(text) else part for part in command]
            command = [f"{alone}/" if part == f"{output}/" else str(alone) if part == str(output) else part
                       for part in command]
            startup[name] = run_command(name, command, threads, alone)[1]
            print(f"done: {name}", file=sys.stderr, flush=True)

    rates = {name: tokens / seconds for name, seconds, _ in results}
    bare = rates["bare Embedder (after loading)"]
    print(f"{len(lines)} lines, {tokens} tokens, model {args.model}, {args.threads} threads per run")
    cost = "" if args.price_per_hour is None else "  cost/1e9 tok"
    print(f"{'run':34} {'seconds':>8} {'tokens/s':>9} {'of bare':>7} {'start-up s':>10} {'less start-up':>13} "
          f"{'bytes/token':>11} {'hours/1e9 tok':>13}{cost}")
    for name, seconds, size in results:
        hours = 1e9 / rates[name] / 3600
        price = "" if args.price_per_hour is None else f"  {hours * args.price_per_hour:13.2f}"
        bytes_per_token = f"{size / tokens:11.0f}" if size else f"{'-':>11}"
        steady = (f"{'-':>10} {'-':>13}" if name not in startup else
                  f"{startup[name]:10.1f} {tokens / (seconds - startup[name]) / bare:13.2f}")
        print(f"{name:34} {seconds:8.1f} {rates[name]:9.0f} {rates[name] / bare:7.2f} {steady} {bytes_per_token} "
              f"{hours:13.1f}{price}")
    for engine in ("torchrun", "Ray"):
        ratio = rates[f"{engine}, 2 worker(s)"] / rates[f"{engine}, 1 worker(s)"]
        print(f"{engine}: 2 workers / 1 worker = {ratio:.2f}")


if __name__ == "__main__":
    main()
