"""Would bfloat16 products pay for training on this CPU? Every matrix product of one training step (the paired LSTM
layers' forward and backward, the sampled softmax's three), timed in float32 and in bfloat16 side by side in one
process, at the step's own shapes. On a CPU with AMX or AVX-512 BF16 units oneDNN runs bfloat16 products on
them; elsewhere bfloat16 is emulated and slower.

    python benchmarks/bf16_products.py [--configs tiny small] [--rows 64 512] [--threads 1 2] [--negatives 1024]

Each product is timed the fastest of the ways PyTorch offers for its type (``ways_to_multiply``: the float32
products against weights on oneDNN's reordered copies, as the training kernels run them), on operands already in
each type (a bfloat16 path would also cast activations and
keep float32 master weights: elementwise work not counted here). The printed milliseconds are per training step
(a product run once a step, or at each of the 20 steps of a layer, times its count); the last column is the
float32 time over the bfloat16 time. The char CNN's products are not included (a few per cent of a step).
"""

import argparse
from collections.abc import Callable

import torch
import torch.nn.functional as F
from _timing import best_rate

from elmo.modules.prepacked import ReorderedWeight, can_reorder
from elmo.training.presets import TRAINING_PRESETS

UNROLL_STEPS = 20
CPU = torch.device("cpu")


Product = tuple[str, int, tuple[int, ...], tuple[int, ...]]


def step_products(config_name: str, rows: int, negatives: int) -> list[Product]:
    """(name, calls a step, left shape, right shape) of every product of a training step; a leading 2 is both
    directions side by side (a batched product), as the paired layer runs them."""
    lstm = TRAINING_PRESETS[config_name].lstm
    dim, projection, n_layers = lstm.dim, lstm.projection_dim, lstm.n_layers
    positions = rows * UNROLL_STEPS
    per_step = UNROLL_STEPS * n_layers
    return [
        ("input gates", n_layers, (2, positions, projection), (2, projection, 4 * dim)),
        ("recurrent, each step", per_step, (2, rows, projection), (2, projection, 4 * dim)),
        ("projection, each step", per_step, (2, rows, dim), (2, dim, projection)),
        ("backward: recurrent, each step", per_step, (2, rows, 4 * dim), (2, 4 * dim, projection)),
        ("backward: projection, each step", per_step, (2, rows, projection), (2, projection, dim)),
        ("backward: LSTM weight gradients", n_layers, (2, 4 * dim, positions), (2, positions, 2 * projection)),
        ("backward: projection gradient", n_layers, (2, projection, positions), (2, positions, dim)),
        ("backward: d inputs", n_layers, (2, positions, 4 * dim), (2, 4 * dim, projection)),
        ("softmax logits", 1, (2 * positions, projection), (projection, negatives + 1)),
        ("softmax: d hidden", 1, (2 * positions, negatives + 1), (negatives + 1, projection)),
        ("softmax: d weights", 1, (negatives + 1, 2 * positions), (2 * positions, projection)),
    ]


def ways_to_multiply(left: torch.Tensor, right: torch.Tensor) -> dict[str, Callable[[], object]]:
    """``left @ right`` (per direction where they are batched) as PyTorch's batched or plain product, as
    ``F.linear`` against the right side as a weight, and in float32 on oneDNN's reordered copy of it
    (``ReorderedWeight``, what the training kernels use for their products against weights)."""
    lefts, rights = (left, right) if left.dim() == 3 else (left[None], right[None])
    weights = [direction.T.contiguous() for direction in rights]
    ways: dict[str, Callable[[], object]] = {
        "matmul": lambda: torch.bmm(left, right) if left.dim() == 3 else torch.mm(left, right),
        "linear": lambda: [F.linear(inputs, weight) for inputs, weight in zip(lefts, weights, strict=True)],
    }
    if can_reorder(right):
        reordered = [ReorderedWeight(weight) for weight in weights]
        ways["oneDNN reordered"] = lambda: [product(inputs)
                                            for inputs, product in zip(lefts, reordered, strict=True)]
    return ways


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["tiny", "small"], choices=sorted(TRAINING_PRESETS))
    parser.add_argument("--rows", nargs="+", type=int, default=[64, 512])
    parser.add_argument("--threads", nargs="+", type=int, default=[1])
    parser.add_argument("--negatives", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=0.5, help="timing per product and type")
    args = parser.parse_args()
    print(f"torch {torch.__version__}")
    for threads in args.threads:
        torch.set_num_threads(threads)
        for config_name in args.configs:
            for rows in args.rows:
                print(f"\n{config_name}, {rows} rows x {UNROLL_STEPS}, {args.negatives} negatives, {threads} thread(s)")
                print(f"{'product':34} {'calls':>5} {'fp32 ms':>9} {'bf16 ms':>9} {'fp32/bf16':>9}")
                totals = {torch.float32: 0.0, torch.bfloat16: 0.0}
                for name, calls, left_shape, right_shape in step_products(config_name, rows, args.negatives):
                    flops = 2.0 * torch.Size(left_shape).numel() * right_shape[-1]
                    milliseconds = {}
                    for dtype in totals:  # each type's fastest way
                        left, right = torch.randn(left_shape, dtype=dtype), torch.randn(right_shape, dtype=dtype)
                        rate = max(best_rate(way, flops, args.seconds, CPU)
                                   for way in ways_to_multiply(left, right).values())
                        milliseconds[dtype] = calls * flops / rate / 1e6
                        totals[dtype] += milliseconds[dtype]
                    print(f"{name:34} {calls:5} {milliseconds[torch.float32]:9.2f} "
                          f"{milliseconds[torch.bfloat16]:9.2f} "
                          f"{milliseconds[torch.float32] / milliseconds[torch.bfloat16]:9.2f}")
                print(f"{'all products':34} {'':5} {totals[torch.float32]:9.2f} {totals[torch.bfloat16]:9.2f} "
                      f"{totals[torch.float32] / totals[torch.bfloat16]:9.2f}")


if __name__ == "__main__":
    main()
