"""Two ways the paired training layer might run faster on CPU, each timed against the layer as it runs.
``PairedLstmLayer`` (``modules/paired_lstm.py``) forward + backward on a training step's shapes, against:

- ``compiled block``: each step's elementwise work compiled by ``torch.compile`` (inductor fuses it into one C++
  loop): in the forward the cell, the local derivatives, the clip mask and their stores; in the backward the
  cell's gradient, the four gates' gradients and their store. The products stay as they are. The block writes its
  results with ``copy_``: dynamo refuses ``out=`` into the layer's buffers (views across both directions, not
  contiguous).
- ``bmm products``: the per-step products as one batched ``bmm`` for both directions on the weights transposed
  once per call (contiguous), instead of oneDNN's product per direction on a reordered copy.

Side by side in one process, alternating, median of the repeats.

    python benchmarks/paired_layer_variants.py [--configs tiny small] [--rows 64 128] [--threads 1 2]

``benchmarks/compiled_cell.py`` timed ``lstm_cell`` alone; the compiled block is the whole elementwise block
around it, which a profile put at about 15 % of a training step (docs/training.md).
"""

import argparse
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from elmo.memory import keep_freed_memory
from elmo.modules import paired_lstm
from elmo.modules.lstm import lstm_cell
from elmo.modules.paired_lstm import PairedLstmLayer, _PairProduct
from elmo.training.presets import TRAINING_PRESETS

UNROLL_STEPS = 20


def forward_block(gates: torch.Tensor, cell: torch.Tensor, cell_clip: float, by_i: torch.Tensor,
                  by_j: torch.Tensor, by_f: torch.Tensor, by_hidden_o: torch.Tensor, hidden_to_cell: torch.Tensor,
                  forget_gates: torch.Tensor, cell_passes: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    """One forward step after its product: what ``PairedLstmLayer.forward`` computes and stores, fused."""
    step = lstm_cell(gates, cell, cell_clip)
    i, j, f, o = step.input_gate, step.candidate, step.forget_gate, step.output_gate
    passes = step.cell_unclipped.abs() <= cell_clip
    by_i.copy_(j * i * (1.0 - i))
    by_j.copy_(i * (1.0 - j * j))
    by_f.copy_(cell * f * (1.0 - f))
    by_hidden_o.copy_(step.cell_tanh * o * (1.0 - o))
    hidden_to_cell.copy_(o * (1.0 - step.cell_tanh * step.cell_tanh) * passes)
    forget_gates.copy_(f)
    cell_passes.copy_(passes)
    hidden.copy_(step.hidden)
    return step.cell


def backward_block(d_hidden: torch.Tensor, d_cell: torch.Tensor, cell_passes: torch.Tensor,
                   hidden_to_cell: torch.Tensor, by_hidden_o: torch.Tensor, by_i: torch.Tensor, by_j: torch.Tensor,
                   by_f: torch.Tensor, forget_gates: torch.Tensor, d_gates: torch.Tensor) -> torch.Tensor:
    """One backward step between its two products: the gates' gradients stored, the previous cell's returned."""
    d_cell = d_cell * cell_passes + d_hidden * hidden_to_cell
    d_gates.copy_(torch.cat([d_cell * by_i, d_cell * by_j, d_cell * by_f, d_hidden * by_hidden_o], dim=-1))
    return d_cell * forget_gates


class CompiledBlocks:
    """The two blocks compiled for the thread count in force (inductor writes it into the code it makes)."""

    forward = forward_block
    backward = backward_block

    @classmethod
    def compile(cls) -> None:
        torch._dynamo.reset()
        cls.forward = torch.compile(forward_block, dynamic=False)
        cls.backward = torch.compile(backward_block, dynamic=False)


class CompiledBlockLayer(torch.autograd.Function):
    """``PairedLstmLayer`` with a projection and both clips (every training preset's layer), its per-step
    elementwise work in ``CompiledBlocks``; the same arguments and results."""

    @staticmethod
    def forward(ctx: Any, inputs: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, n_rows: int, cell_clip: float,
                proj_clip: float, input_weight: torch.Tensor, recurrent_weight: torch.Tensor, bias: torch.Tensor,
                projection: torch.Tensor) -> tuple[torch.Tensor, ...]:
        n_positions, dim = inputs.shape[1], c0.shape[2]
        gates = _PairProduct(input_weight)(inputs, bias=bias)
        recurrent, project = _PairProduct(recurrent_weight), _PairProduct(projection)
        new = inputs.new_empty
        by_cell, by_hidden_o = new((3, 2, n_positions, dim)), new((2, n_positions, dim))
        hidden_to_cell, forget_gates, hidden = (new((2, n_positions, dim)) for _ in range(3))
        cell_passes = torch.ones((2, n_positions, dim), dtype=torch.bool)
        outputs_unclipped, outputs = new((2, n_positions, h0.shape[2])), new((2, n_positions, h0.shape[2]))
        h, c = h0, c0
        for step in range(n_positions // n_rows):
            rows = slice(step * n_rows, (step + 1) * n_rows)
            step_gates = recurrent(h, out=gates[:, rows], addend=gates[:, rows])
            c = CompiledBlocks.forward(step_gates, c, cell_clip, by_cell[0, :, rows], by_cell[1, :, rows],
                                       by_cell[2, :, rows], by_hidden_o[:, rows], hidden_to_cell[:, rows],
                                       forget_gates[:, rows], cell_passes[:, rows], hidden[:, rows])
            project(hidden[:, rows], out=outputs_unclipped[:, rows])
            torch.clamp(outputs_unclipped[:, rows], -proj_clip, proj_clip, out=outputs[:, rows])
            h = outputs[:, rows]
        ctx.n_rows = n_rows
        ctx.save_for_backward(inputs, h0, input_weight, recurrent_weight, projection, by_cell, by_hidden_o,
                              hidden_to_cell, forget_gates, cell_passes, hidden, outputs,
                              outputs_unclipped.abs() <= proj_clip)
        return outputs, h.clone(), c.clone()

    @staticmethod
    def backward(ctx: Any, d_outputs: torch.Tensor, d_h_last: torch.Tensor,
                 d_c_last: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        (inputs, h0, input_weight, recurrent_weight, projection, by_cell, by_hidden_o, hidden_to_cell, forget_gates,
         cell_passes, hidden, outputs, output_passes) = ctx.saved_tensors
        n_rows, n_positions, dim = ctx.n_rows, inputs.shape[1], forget_gates.shape[2]
        d_gates = inputs.new_empty((2, n_positions, 4 * dim))
        d_outputs_unclipped = torch.empty_like(d_outputs)
        recurrent_t = _PairProduct(recurrent_weight.transpose(1, 2))
        projection_t = _PairProduct(projection.transpose(1, 2))
        d_h, d_c = d_h_last, d_c_last
        for step in reversed(range(n_positions // n_rows)):
            rows = slice(step * n_rows, (step + 1) * n_rows)
            d_h = (d_h + d_outputs[:, rows]) * output_passes[:, rows]
            d_outputs_unclipped[:, rows] = d_h
            d_c = CompiledBlocks.backward(projection_t(d_h), d_c, cell_passes[:, rows], hidden_to_cell[:, rows],
                                          by_hidden_o[:, rows], by_cell[0, :, rows], by_cell[1, :, rows],
                                          by_cell[2, :, rows], forget_gates[:, rows], d_gates[:, rows])
            d_h = recurrent_t(d_gates[:, rows])
        previous_outputs = torch.cat([h0, outputs[:, : n_positions - n_rows]], dim=1)
        d_weights = torch.bmm(d_gates.transpose(1, 2), torch.cat([inputs, previous_outputs], dim=2))
        d_input_weight, d_recurrent_weight = d_weights.split([inputs.shape[2], previous_outputs.shape[2]], dim=2)
        return (torch.bmm(d_gates, input_weight), d_h, d_c, None, None, None, d_input_weight, d_recurrent_weight,
                d_gates.sum(dim=1), torch.bmm(d_outputs_unclipped.transpose(1, 2), hidden))


class _BmmProduct(_PairProduct):
    """``_PairProduct`` as it runs without oneDNN (one batched product), on a transposed weight made contiguous."""

    def __init__(self, weight: torch.Tensor) -> None:
        self.weight_t = weight.transpose(1, 2).contiguous()
        self.reordered = None


@contextmanager
def bmm_products() -> Iterator[None]:
    """``PairedLstmLayer`` with its per-step products as ``_BmmProduct``'s, inside the block."""
    paired_lstm._PairProduct = _BmmProduct  # type: ignore[misc]
    try:
        yield
    finally:
        paired_lstm._PairProduct = _PairProduct  # type: ignore[misc]


def layer_arguments(name: str, rows: int) -> tuple[list[torch.Tensor], tuple[int, float, float]]:
    """A layer's inputs and weights of preset ``name`` and its ``(n_rows, cell_clip, proj_clip)``. At these
    scales the cell clip holds a few cells (0.03-0.04 %) and no output reaches the projection clip: where many
    values lie near a clip's bound, float32 rounding flips some of their masks and the two ways' gradients stop
    being comparable element by element."""
    lstm = TRAINING_PRESETS[name].lstm
    generator = torch.Generator().manual_seed(0)
    dim, projection_dim = lstm.dim, lstm.projection_dim

    def draw(*shape: int, scale: float) -> torch.Tensor:
        return (scale * torch.randn(*shape, generator=generator)).requires_grad_()

    input_scale, hidden_scale = 2 / projection_dim**0.5, 2 / dim**0.5
    tensors = [draw(2, UNROLL_STEPS * rows, projection_dim, scale=1.0), torch.zeros(2, rows, projection_dim),
               torch.zeros(2, rows, dim), draw(2, 4 * dim, projection_dim, scale=input_scale),
               draw(2, 4 * dim, projection_dim, scale=input_scale), draw(2, 4 * dim, scale=0.5),
               draw(2, projection_dim, dim, scale=hidden_scale)]
    return tensors, (rows, lstm.cell_clip, lstm.proj_clip)


def forward_backward(layer: type[torch.autograd.Function], tensors: list[torch.Tensor],
                     settings: tuple[int, float, float]) -> list[torch.Tensor]:
    """The outputs and every gradient of one forward and backward (a loss that reaches all three results)."""
    inputs, h0, c0, *weights = tensors
    outputs, h_last, c_last = layer.apply(inputs, h0, c0, *settings, *weights)
    (outputs.square().sum() + h_last.sum() + c_last.sum()).backward()
    with_gradients = [inputs, *weights]
    gradients = [tensor.grad for tensor in with_gradients]
    for tensor in with_gradients:
        tensor.grad = None
    return [outputs.detach(), *gradients]


def with_bmm_products(tensors: list[torch.Tensor], settings: tuple[int, float, float]) -> list[torch.Tensor]:
    with bmm_products():
        return forward_backward(PairedLstmLayer, tensors, settings)


WAYS: dict[str, Callable[[list[torch.Tensor], tuple[int, float, float]], list[torch.Tensor]]] = {
    "today": lambda tensors, settings: forward_backward(PairedLstmLayer, tensors, settings),
    "compiled block": lambda tensors, settings: forward_backward(CompiledBlockLayer, tensors, settings),
    "bmm products": with_bmm_products,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["tiny", "small"], choices=sorted(TRAINING_PRESETS))
    parser.add_argument("--rows", nargs="+", type=int, default=[64, 128])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--repeats", type=int, default=9, help="timed calls per layer and way (rotating order)")
    args = parser.parse_args()
    keep_freed_memory()  # as elmo train does: freed buffers are reused, not faulted in again every call
    print("| config | rows | threads | today ms | compiled block ms | today / compiled | bmm products ms "
          "| today / bmm | largest relative difference | compile s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    names = list(WAYS)
    for threads in args.threads:
        torch.set_num_threads(threads)
        CompiledBlocks.compile()
        for name in args.configs:
            for rows in args.rows:
                tensors, settings = layer_arguments(name, rows)
                start = time.perf_counter()
                results = {"compiled block": WAYS["compiled block"](tensors, settings)}
                compile_seconds = time.perf_counter() - start
                results.update({way: WAYS[way](tensors, settings) for way in ("today", "bmm products")})
                difference = max(float((a - b).abs().max() / b.abs().max()) for way in ("compiled block",
                                 "bmm products") for a, b in zip(results[way], results["today"], strict=True))
                if difference > 1e-5:
                    raise SystemExit(f"a way's results differ from the layer's by {difference:.1e}")
                times: dict[str, list[float]] = {way: [] for way in names}
                for repeat in range(args.repeats):
                    for way in names[repeat % len(names):] + names[: repeat % len(names)]:
                        start = time.perf_counter()
                        WAYS[way](tensors, settings)
                        times[way].append(time.perf_counter() - start)
                today_s, compiled_s, bmm_s = (sorted(times[way])[args.repeats // 2] for way in names)
                print(f"| {name} | {rows} | {threads} | {today_s * 1e3:.1f} | {compiled_s * 1e3:.1f} "
                      f"| {today_s / compiled_s:.2f} | {bmm_s * 1e3:.1f} | {today_s / bmm_s:.2f} | {difference:.1e} "
                      f"| {compile_seconds:.0f} |", flush=True)


if __name__ == "__main__":
    main()
