"""The training kernel of one projected LSTM layer: both directions side by side, every step of a batch at once,
with a hand-written backward.

Autograd through the step loop records ~20 small operations per step and replays them one by one; here the
forward keeps only what the backward needs (gate activations, cells before and after clipping, the projection's
input), the backward runs the time loop on the few products a step needs, and every weight gradient is one
large product over all steps after the loop. The forward and backward direction run as one batched product per
step, on weights stacked along a first axis of 2.

The equations are ``ProjectedLstm``'s (``modules/lstm.py``): TF's gate order i, j, f, o, the forget bias added
to f, the cell clipped to ``+-cell_clip``, ``h = o * tanh(c)`` projected and clipped to ``+-proj_clip``. A clip's
gradient is clamp's: it passes where the unclipped value lies within the clip, bounds included.

Rows are full: every row runs every step (training batches are ``rows x unroll_steps``). Inputs are
time-major, step t of row r at ``t * n_rows + r``.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
from torch.autograd.function import once_differentiable

from elmo.modules.prepacked import HAS_ONEDNN, prepacked_product

if TYPE_CHECKING:
    from elmo.modules.lstm import LstmStack, ProjectedLstm


class PairWeights(NamedTuple):
    """One layer's parameters for both directions, each stacked on a first axis of 2 (forward, backward).

    ``input_weight`` ``(2, 4 * dim, input_dim)``, ``recurrent_weight`` ``(2, 4 * dim, projection_dim)``, ``bias``
    ``(2, 4 * dim)`` with the forget bias already added, ``projection`` ``(2, projection_dim, dim)`` or None.
    """

    input_weight: torch.Tensor
    recurrent_weight: torch.Tensor
    bias: torch.Tensor
    projection: torch.Tensor | None


class _PairProduct:
    """``inputs (2, rows, n_in) -> (2, rows, n_out)`` against ``weight (2, n_out, n_in)``, run many times within
    one call of the kernel: from oneDNN's reordered copy of each direction's weight on CPU float32 (one reorder per
    call, then no repacking per step), else as one batched product."""

    def __init__(self, weight: torch.Tensor) -> None:
        self.weight_t = weight.transpose(1, 2)
        self.packed = None
        if HAS_ONEDNN and weight.device.type == "cpu" and weight.dtype == torch.float32:
            self.packed = [torch.ops.mkldnn._reorder_linear_weight(w.contiguous()) for w in weight]

    def __call__(self, inputs: torch.Tensor, out: torch.Tensor | None = None,
                 addend: torch.Tensor | None = None) -> torch.Tensor:
        if self.packed is None:
            if addend is None:
                return torch.bmm(inputs, self.weight_t, out=out)
            return torch.baddbmm(addend, inputs, self.weight_t, out=out)
        if out is None:
            out = inputs.new_empty((2, inputs.shape[1], self.weight_t.shape[2]))
        for direction in range(2):
            product = prepacked_product(inputs[direction], self.packed[direction])
            if addend is None:
                out[direction] = product
            else:
                torch.add(product, addend[direction], out=out[direction])
        return out


def _tanh_from_sigmoid_(activations: torch.Tensor) -> torch.Tensor:
    """``sigmoid(2x) -> tanh(x)`` in place: ``tanh(x) = 2 sigmoid(2x) - 1``."""
    return activations.mul_(2.0).sub_(1.0)


class PairedLstmLayer(torch.autograd.Function):
    """``(inputs (2, steps * rows, input_dim), h0 (2, rows, projection_dim), c0 (2, rows, dim), weights...)`` ->
    ``(outputs (2, steps * rows, projection_dim), h_last, c_last)``."""

    @staticmethod
    def forward(ctx: Any, inputs: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, n_rows: int,
                cell_clip: float, proj_clip: float, input_weight: torch.Tensor, recurrent_weight: torch.Tensor,
                bias: torch.Tensor, projection: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
        n_positions, dim = inputs.shape[1], c0.shape[2]
        n_steps = n_positions // n_rows
        # The candidate's rows doubled (exact in floating point): one sigmoid over all four gates then gives
        # tanh(j) as 2 sigmoid(2j) - 1.
        doubled = torch.ones(4 * dim, dtype=inputs.dtype, device=inputs.device)
        doubled[dim : 2 * dim] = 2.0
        input_gates = torch.baddbmm((bias * doubled)[:, None, :], inputs,
                                    (input_weight * doubled[:, None]).transpose(1, 2))
        recurrent = _PairProduct(recurrent_weight * doubled[:, None])
        project = _PairProduct(projection) if projection is not None else None

        activations = input_gates  # overwritten step by step: i, tanh(j), f, o after their nonlinearities
        cells_unclipped = inputs.new_empty((2, n_positions, dim))
        cells = inputs.new_empty((2, n_positions, dim)) if cell_clip else cells_unclipped
        cell_tanh = inputs.new_empty((2, n_positions, dim))
        hidden = inputs.new_empty((2, n_positions, dim)) if project is not None else None
        outputs_unclipped = inputs.new_empty((2, n_positions, h0.shape[2]))
        outputs = inputs.new_empty((2, n_positions, h0.shape[2])) if proj_clip and project else outputs_unclipped
        h, c = h0, c0
        for step in range(n_steps):
            rows = slice(step * n_rows, (step + 1) * n_rows)
            gates = activations[:, rows]
            recurrent(h, out=gates, addend=gates)
            torch.sigmoid(gates, out=gates)
            i, j, f, o = gates.view(2, n_rows, 4, dim).unbind(2)
            _tanh_from_sigmoid_(j)
            cell = torch.addcmul(f * c, i, j, out=cells_unclipped[:, rows])
            if cell_clip:
                cell = torch.clamp(cell, -cell_clip, cell_clip, out=cells[:, rows])
            tanh_cell = _tanh_from_sigmoid_(torch.sigmoid(2.0 * cell, out=cell_tanh[:, rows]))
            if project is None:
                output = torch.mul(o, tanh_cell, out=outputs_unclipped[:, rows])
            else:
                torch.mul(o, tanh_cell, out=hidden[:, rows])
                output = project(hidden[:, rows], out=outputs_unclipped[:, rows])
                if proj_clip:
                    output = torch.clamp(output, -proj_clip, proj_clip, out=outputs[:, rows])
            h, c = output, cell
        ctx.n_rows, ctx.cell_clip, ctx.proj_clip = n_rows, cell_clip, proj_clip
        ctx.save_for_backward(inputs, h0, c0, input_weight, recurrent_weight, projection, activations,
                              cells_unclipped, cells, cell_tanh, hidden, outputs_unclipped, outputs)
        return outputs, h.clone(), c.clone()

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, d_outputs: torch.Tensor, d_h_last: torch.Tensor,
                 d_c_last: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        (inputs, h0, c0, input_weight, recurrent_weight, projection, activations, cells_unclipped, cells,
         cell_tanh, hidden, outputs_unclipped, outputs) = ctx.saved_tensors
        n_rows, cell_clip, proj_clip = ctx.n_rows, ctx.cell_clip, ctx.proj_clip
        n_positions, dim = inputs.shape[1], c0.shape[2]
        n_steps = n_positions // n_rows
        i, j, f, o = activations.view(2, n_positions, 4, dim).unbind(2)
        previous_cells = torch.cat([c0, cells[:, : n_positions - n_rows]], dim=1)
        # The local derivatives of every step at once: each step's backward then multiplies by them.
        d_gates = torch.empty_like(activations)
        d_gates_ijf = d_gates.view(2, n_positions, 4, dim)[:, :, :3]
        by_cell = torch.stack([j * i * (1.0 - i), i * (1.0 - j * j), previous_cells * f * (1.0 - f)], dim=2)
        output_gate_factor = cell_tanh * o * (1.0 - o)
        cell_factor = o * (1.0 - cell_tanh * cell_tanh)
        cell_passes = None
        if cell_clip:
            cell_passes = (cells_unclipped >= -cell_clip) & (cells_unclipped <= cell_clip)
            cell_factor.mul_(cell_passes)
        output_passes = None
        if proj_clip and projection is not None:
            output_passes = (outputs_unclipped >= -proj_clip) & (outputs_unclipped <= proj_clip)
        d_outputs_unclipped = torch.empty_like(d_outputs) if projection is not None else None

        recurrent_t = _PairProduct(recurrent_weight.transpose(1, 2))
        projection_t = _PairProduct(projection.transpose(1, 2)) if projection is not None else None
        d_h = d_h_last.clone()
        d_c = d_c_last.clone()
        for step in reversed(range(n_steps)):
            rows = slice(step * n_rows, (step + 1) * n_rows)
            d_h.add_(d_outputs[:, rows])
            if output_passes is not None:
                d_h.mul_(output_passes[:, rows])
            if projection_t is not None:
                d_outputs_unclipped[:, rows] = d_h
                d_hidden = projection_t(d_h)
            else:
                d_hidden = d_h
            # d_c: the gradient at the clipped cell, then at the unclipped one (clamp passes or stops it).
            if cell_passes is not None:
                d_c.mul_(cell_passes[:, rows])
            d_c.addcmul_(d_hidden, cell_factor[:, rows])
            torch.mul(d_hidden, output_gate_factor[:, rows], out=d_gates[:, rows, 3 * dim :])
            torch.mul(d_c[:, :, None, :], by_cell[:, rows], out=d_gates_ijf[:, rows])
            d_c.mul_(f[:, rows])
            d_h = recurrent_t(d_gates[:, rows])
        # A clip on the state the next step reads stops that step's gradient too: d_c above is at c0.
        previous_outputs = torch.cat([h0, outputs[:, : n_positions - n_rows]], dim=1)
        d_gates_t = d_gates.transpose(1, 2)
        d_input_weight = torch.bmm(d_gates_t, inputs)
        d_recurrent_weight = torch.bmm(d_gates_t, previous_outputs)
        d_bias = d_gates.sum(dim=1)
        d_projection = None
        if projection is not None:
            d_projection = torch.bmm(d_outputs_unclipped.transpose(1, 2), hidden)
        d_inputs = torch.bmm(d_gates, input_weight)
        return (d_inputs, d_h, d_c, None, None, None, d_input_weight, d_recurrent_weight, d_bias, d_projection)


def paired_lstm_layer(inputs: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, n_rows: int, weights: PairWeights,
                      cell_clip: float, proj_clip: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One layer over both directions: see ``PairedLstmLayer``."""
    return PairedLstmLayer.apply(inputs, h0, c0, n_rows, cell_clip, proj_clip, *weights)


def pair_weights(forward_layer: "ProjectedLstm", backward_layer: "ProjectedLstm") -> PairWeights:
    """Both directions' parameters of one layer, stacked (an autograd operation: gradients reach each layer)."""
    dim = forward_layer.dim
    forget_bias = torch.zeros_like(forward_layer.bias)
    forget_bias[2 * dim : 3 * dim] = forward_layer.FORGET_BIAS
    projection = None
    if forward_layer.projection is not None:
        projection = torch.stack([forward_layer.projection, backward_layer.projection])
    return PairWeights(
        torch.stack([forward_layer.input_weight, backward_layer.input_weight]),
        torch.stack([forward_layer.recurrent_weight, backward_layer.recurrent_weight]),
        torch.stack([forward_layer.bias, backward_layer.bias]) + forget_bias,
        projection,
    )


def run_paired_stacks(forward_stack: "LstmStack", backward_stack: "LstmStack", inputs: torch.Tensor,
                      h0: torch.Tensor, c0: torch.Tensor, n_rows: int,
                      input_dropout: Callable[[int, torch.Tensor], torch.Tensor] | None = None,
                      ) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
    """Both directions' stacks over ``inputs (2, steps * rows, input_dim)`` from ``h0 (2, n_layers, rows,
    projection_dim)`` and ``c0 (2, n_layers, rows, dim)``, as ``LstmStack.forward`` runs each direction.

    ``input_dropout(layer_index, layer_input (2, positions, width))`` replaces each layer's input before the layer
    and its skip connection read it. Returns each layer's outputs ``(2, steps * rows, projection_dim)`` and the
    final ``h``, ``c`` in ``h0``'s and ``c0``'s shapes.
    """
    layer_outputs, finals_h, finals_c = [], [], []
    layer_input = inputs
    for index, (forward_layer, backward_layer) in enumerate(zip(forward_stack.layers, backward_stack.layers,
                                                                strict=True)):
        if input_dropout is not None:
            layer_input = input_dropout(index, layer_input)
        output, h, c = paired_lstm_layer(layer_input, h0[:, index], c0[:, index], n_rows,
                                         pair_weights(forward_layer, backward_layer), forward_layer.cell_clip,
                                         forward_layer.proj_clip)
        if index > 0 and forward_stack.use_skip_connections:
            output = output + layer_input
        layer_outputs.append(output)
        finals_h.append(h)
        finals_c.append(c)
        layer_input = output
    return layer_outputs, torch.stack(finals_h, dim=1), torch.stack(finals_c, dim=1)
