"""Does compiling ``lstm_cell`` pay on CPU? ``lstm_cell`` (the one statement of the cell every runner calls) as
PyTorch runs it, one elementwise call after another, against ``torch.compile`` of the same function (inductor
fuses its ~12 elementwise operations into one C++ loop), side by side in one process. Only that function is
timed: the paired training layer's other elementwise work around each call (local derivatives, clip masks,
stores) and its backward are neither compiled nor timed here.

    python benchmarks/compiled_cell.py [--configs tiny small] [--rows 64 128] [--threads 1 2]

The shapes are a training step's: both directions side by side, ``(2, rows, 4 * dim)`` gates. A training step
calls the cell ``unroll_steps x n_layers`` times (40 for the presets here); the printed milliseconds per step are
that many calls, to hold against a whole step's time (benchmarks/train_throughput.py).
"""

import argparse
import time
from functools import partial

import torch
from _timing import median_call_seconds

from elmo.modules.lstm import lstm_cell
from elmo.training.presets import TRAINING_PRESETS

UNROLL_STEPS = 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["tiny", "small"], choices=sorted(TRAINING_PRESETS))
    parser.add_argument("--rows", nargs="+", type=int, default=[64, 128])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--seconds", type=float, default=2.0, help="timing per case and way")
    args = parser.parse_args()
    print("| config | rows | threads | eager us/call | compiled us/call | compiled / eager speed | eager ms/step "
          "| compile s |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.configs:
        lstm = TRAINING_PRESETS[name].lstm
        for rows in args.rows:
            gates = torch.randn(2, rows, 4 * lstm.dim)
            previous = 2 * torch.randn(2, rows, lstm.dim)  # some cells beyond the clip of 3
            for threads in args.threads:
                torch.set_num_threads(threads)
                # inductor writes the thread count into the code it generates and dynamo does not guard on it:
                # compiled once, every later count would run the first one's threads
                torch._dynamo.reset()
                compiled = torch.compile(lstm_cell, dynamic=False)
                start = time.perf_counter()
                expected, got = lstm_cell(gates, previous, lstm.cell_clip), compiled(gates, previous, lstm.cell_clip)
                compile_seconds = time.perf_counter() - start
                worst = max(float((a - b).abs().max()) for a, b in zip(expected, got, strict=True))
                if worst > 1e-5:
                    raise SystemExit(f"the compiled cell differs from the eager one by {worst}")
                eager_s = median_call_seconds(partial(lstm_cell, gates, previous, lstm.cell_clip), args.seconds)
                compiled_s = median_call_seconds(partial(compiled, gates, previous, lstm.cell_clip), args.seconds)
                per_step_ms = eager_s * UNROLL_STEPS * lstm.n_layers * 1e3
                print(f"| {name} | {rows} | {threads} | {eager_s * 1e6:.0f} | {compiled_s * 1e6:.0f} "
                      f"| {eager_s / compiled_s:.2f} | {per_step_ms:.1f} | {compile_seconds:.0f} |")


if __name__ == "__main__":
    main()
