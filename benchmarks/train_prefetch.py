"""`elmo train` end to end with and without the next batch built on a thread during each step, side by side in
one process: tokens/s from the run's own log (the time between log lines, batches included), and the ratio.

    python benchmarks/train_prefetch.py --corpus TEXT --init-from en --batch-size 1024 --steps 40   # on a GPU
    python benchmarks/train_prefetch.py --corpus TEXT --init-from en --batch-size 64 --steps 30     # on a CPU

The runs alternate (off, on, off, on, ...) so that drift of a shared host falls on both; each run's first log
interval (start-up, first kernels) is left out. `elmo train` prefetches where the steps run on a GPU
(`trainer.train`'s ``prefetch``); on a CPU the thread takes a core from the step.
"""

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import torch

from elmo.training.trainer import TrainingOptions, train


def tokens_per_s(run: Path) -> list[float]:
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    return [r["tokens_per_s"] for r in records if "tokens_per_s" in r][1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="whitespace-tokenized text")
    parser.add_argument("--init-from", required=True, help="a model name or directory (its vocabulary is used)")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--log-every", type=int, default=5)
    parser.add_argument("--negatives", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=2, help="runs of each kind, alternating")
    args = parser.parse_args()

    rates: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as directory:
        for repeat in range(args.repeats):
            for prefetch in (False, True):
                options = TrainingOptions(corpus=[args.corpus], init_from=args.init_from, min_count=10**9,
                                          batch_size=args.batch_size, n_negatives=args.negatives, optimizer="adam",
                                          learning_rate=1e-3, max_steps=args.steps, log_every=args.log_every,
                                          checkpoint_every=10**9, valid_every=10**9)
                run = Path(directory) / f"{repeat}-{prefetch}"
                train(options, run, progress=False, prefetch=prefetch)
                rates[prefetch].extend(tokens_per_s(run))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"elmo train, {args.batch_size} rows x 20 steps, {args.init_from}, on {device} "
          f"({torch.get_num_threads()} threads), median tokens/s of {args.log_every}-step intervals:")
    for prefetch in (False, True):
        values = rates[prefetch]
        print(f"  prefetch {'on ' if prefetch else 'off'}: {statistics.median(values):,.0f} "
              f"(min {min(values):,.0f}, max {max(values):,.0f}, {len(values)} intervals)")
    print(f"  on / off: {statistics.median(rates[True]) / statistics.median(rates[False]):.3f}")


if __name__ == "__main__":
    main()
