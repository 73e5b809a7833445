"""Which tanh the LSTM cell should take on this CPU: PyTorch's (MKL's vector tanh where PyTorch has MKL) against
the identity ``2 sigmoid(2x) - 1``, side by side in one process on the cell's shapes, and which one ``fast_tanh``
takes here (``modules/lstm.py``: PyTorch's where MKL runs its code for Intel's CPUs).

    python benchmarks/tanh_choice.py [--threads 1 2]

Shapes: a training step's cell state at 64 and 512 rows (both directions, 512 cells: the `tiny` preset) and an
inference step of the `original` model (32 rows x 4,096 cells). Each figure is the median of 7 rounds of calls.
"""

import argparse
import statistics
import time

import torch

from elmo.modules.lstm import mkl_tanh_is_fast, tanh_by_sigmoid

SHAPES = ((2, 64, 512), (2, 512, 512), (32, 4096))


def microseconds_per_call(function, x: torch.Tensor, rounds: int = 7, calls: int = 100) -> float:
    """The median over ``rounds`` of the mean time of ``calls`` calls, after a warm-up."""
    for _ in range(10):
        function(x)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            function(x)
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1])
    args = parser.parse_args()
    print(f"MKL: {torch.backends.mkl.is_available()}; fast_tanh takes "
          f"{'torch.tanh' if mkl_tanh_is_fast() else 'the identity'} on this CPU")
    print("| threads | shape | torch.tanh us | identity us | identity / tanh |")
    print("|---|---|---|---|---|")
    with torch.no_grad():
        for threads in args.threads:
            torch.set_num_threads(threads)
            for shape in SHAPES:
                x = torch.randn(shape)
                tanh = microseconds_per_call(torch.tanh, x)
                identity = microseconds_per_call(tanh_by_sigmoid, x)
                print(f"| {threads} | {' x '.join(map(str, shape))} | {tanh:.0f} | {identity:.0f} | "
                      f"{identity / tanh:.2f} |")


if __name__ == "__main__":
    main()
