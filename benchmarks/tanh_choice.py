"""Which tanh the LSTM cell should take on this CPU: PyTorch's (MKL's vector tanh where PyTorch has MKL) against
the identity ``2 sigmoid(2x) - 1``, side by side in one process on the cell's shapes, and which one ``fast_tanh``
takes here (``modules/lstm.py``: PyTorch's where MKL runs its code for Intel's CPUs).

    python benchmarks/tanh_choice.py [--threads 1 2]

Shapes: a training step's cell state at 64 and 512 rows (both directions, 512 cells: the `tiny` preset) and an
inference step of the `original` model (32 rows x 4,096 cells). Each figure is the median time of a call over
``--seconds`` of calls.
"""

import argparse
from functools import partial

import torch
from _timing import median_call_seconds

from elmo.modules.lstm import mkl_tanh_is_fast, tanh_by_sigmoid

SHAPES = ((2, 64, 512), (2, 512, 512), (32, 4096))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1])
    parser.add_argument("--seconds", type=float, default=1.0, help="timing per shape and way")
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
                tanh = median_call_seconds(partial(torch.tanh, x), args.seconds) * 1e6
                identity = median_call_seconds(partial(tanh_by_sigmoid, x), args.seconds) * 1e6
                print(f"| {threads} | {' x '.join(map(str, shape))} | {tanh:.0f} | {identity:.0f} | "
                      f"{identity / tanh:.2f} |")


if __name__ == "__main__":
    main()
