"""The training kernel of one projected LSTM layer: both directions side by side, every step of a batch at once,
with a hand-written backward.

Autograd through the step loop records ~20 small operations per step and replays them one by one; here the
forward keeps only what the backward needs (each step's local derivatives, the clips' masks, the projection's
input and the outputs), the backward runs the time loop on the few products a step needs, and every weight
gradient is one large product over all steps after the loop. The forward and backward direction run as one
batched product per step, on weights stacked along a first axis of 2.

The equations are ``ProjectedLstm``'s (``modules/lstm.py``): TF's gate order i, j, f, o, the forget bias added
to f, the cell clipped to ``+-cell_clip``, ``h = o * tanh(c)`` projected and clipped to ``+-proj_clip``. A clip's
gradient is clamp's: it passes where the unclipped value lies within the clip, bounds included.

Rows are full: every row runs every step (training batches are ``rows x unroll_steps``). Inputs are
time-major, step t of row r at ``t * n_rows + r``.

The backward is not differentiable again: gradients of gradients need autograd's step loop (``reference_kernels``
on ``BiLM`` or ``LanguageModel``), and differentiating the kernel's gradients raises an error that says so.
"""

from typing import Any, NamedTuple

import torch

from elmo.modules.first_order import first_order_only
from elmo.modules.low_precision import product
from elmo.modules.lstm import ProjectedLstm, lstm_cell
from elmo.modules.prepacked import ReorderedWeight, can_reorder


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
    """``inputs (2, rows, n_in) -> (2, rows, n_out)`` against ``weight (2, n_out, n_in)``, run at every step of one
    call of the kernel: with a ``product_dtype`` (``modules/low_precision.py``) one batched product of that type's
    copies, the weight's made once per call; else on CPU float32 each direction's weight is reordered for oneDNN
    once per call (``ReorderedWeight``), so no step repacks it; elsewhere one batched product."""

    def __init__(self, weight: torch.Tensor, product_dtype: torch.dtype | None = None) -> None:
        self.product_dtype = None if product_dtype == weight.dtype else product_dtype
        self.weight_dtype = weight.dtype
        self.weight_t = weight.transpose(1, 2)
        self.reordered = None
        if self.product_dtype is not None:
            self.weight_t = self.weight_t.to(self.product_dtype)
        elif can_reorder(weight):
            self.reordered = [ReorderedWeight(direction_weight) for direction_weight in weight]

    def rounded(self, inputs: torch.Tensor) -> torch.Tensor:
        """``inputs @ weight.T`` per direction in ``product_dtype``, for a product that has one (inputs already of
        that type are used as they are)."""
        if self.product_dtype is None:
            raise ValueError("this product runs in its operands' type: it has no rounded result")
        return torch.bmm(inputs.to(self.product_dtype), self.weight_t)

    def __call__(self, inputs: torch.Tensor, out: torch.Tensor | None = None, addend: torch.Tensor | None = None,
                 bias: torch.Tensor | None = None) -> torch.Tensor:
        """``addend + inputs @ weight.T + bias`` per direction, in the weight's type; ``bias`` ``(2, n_out)``,
        ``addend`` like the result."""
        if self.product_dtype is not None:
            low = self.rounded(inputs)
            if out is None:
                out = low.new_empty(low.shape, dtype=self.weight_dtype)
            if addend is None:
                out.copy_(low)
            else:
                torch.add(addend, low, out=out)
            return out if bias is None else out.add_(bias[:, None, :])
        if self.reordered is None:
            if bias is not None:
                addend = bias[:, None, :] if addend is None else addend + bias[:, None, :]
            if addend is None:
                return torch.bmm(inputs, self.weight_t, out=out)
            return torch.baddbmm(addend, inputs, self.weight_t, out=out)
        if out is None:
            out = inputs.new_empty((2, inputs.shape[1], self.weight_t.shape[2]))
        for direction, weight in enumerate(self.reordered):
            product = weight(inputs[direction], None if bias is None else bias[direction])
            if addend is None:
                out[direction] = product
            else:
                torch.add(product, addend[direction], out=out[direction])
        return out


class PairedLstmLayer(torch.autograd.Function):
    """``(inputs (2, steps * rows, input_dim), h0 (2, rows, projection_dim), c0 (2, rows, dim), weights...)`` ->
    ``(outputs (2, steps * rows, projection_dim), h_last, c_last)``.

    The forward keeps, per step, the local derivatives the backward multiplies by (computed while the step's
    activations are in cache): the cell's gradient reaches i, j and f through ``by_cell``, the output gate through
    ``by_hidden_o``, the cell through ``hidden_to_cell``, the previous cell through ``forget_gates``.
    """

    @staticmethod
    def forward(ctx: Any, inputs: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, n_rows: int,
                cell_clip: float, proj_clip: float, product_dtype: torch.dtype | None, input_weight: torch.Tensor,
                recurrent_weight: torch.Tensor, bias: torch.Tensor,
                projection: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
        n_positions, dim = inputs.shape[1], c0.shape[2]
        input_product = _PairProduct(input_weight, product_dtype)
        recurrent = _PairProduct(recurrent_weight, product_dtype)
        project = _PairProduct(projection, product_dtype) if projection is not None else None
        new = inputs.new_empty
        # W x + b for every step at once, then + U h step by step. With a product_dtype the products over all
        # steps stay in that type (as rounded) and a step's gates come to float32 in a buffer of one step's size:
        # float32 copies of the whole would be written and read once more for nothing.
        low = product_dtype is not None
        gates = input_product.rounded(inputs) if low else input_product(inputs, bias=bias)
        step_gates = new((2, n_rows, 4 * dim)) if low else None  # W x + b of one step in float32, then + U h
        by_cell = new((3, 2, n_positions, dim))  # d c / d (i, j, f) before their nonlinearities
        by_hidden_o = new((2, n_positions, dim))  # d hidden / d o
        hidden_to_cell = new((2, n_positions, dim))  # d hidden / d c (the clipped cell)
        forget_gates = new((2, n_positions, dim))  # d c / d c'
        cell_passes = torch.empty((2, n_positions, dim), dtype=torch.bool, device=inputs.device) if cell_clip else None
        # kept for the projection's weight gradient only, so in the type that product takes
        hidden = new((2, n_positions, dim), dtype=product_dtype if low and project is not None else inputs.dtype)
        outputs_unclipped = hidden if project is None else new((2, n_positions, h0.shape[2]))
        outputs = new(outputs_unclipped.shape) if proj_clip and project else outputs_unclipped
        h, c = h0, c0
        for step in range(n_positions // n_rows):
            rows = slice(step * n_rows, (step + 1) * n_rows)
            if step_gates is None:
                cell_step = lstm_cell(recurrent(h, out=gates[:, rows], addend=gates[:, rows]), c, cell_clip)
            else:
                torch.add(gates[:, rows], bias[:, None, :], out=step_gates)
                cell_step = lstm_cell(recurrent(h, out=step_gates, addend=step_gates), c, cell_clip)
            i, j, f, o = cell_step.input_gate, cell_step.candidate, cell_step.forget_gate, cell_step.output_gate
            # Each in two elementwise passes (x (1 - x) as x - x x), as a step's memory traffic bounds its time.
            torch.mul(j, torch.addcmul(i, i, i, value=-1.0), out=by_cell[0, :, rows])  # j i (1 - i)
            torch.addcmul(i, i, j * j, value=-1.0, out=by_cell[1, :, rows])  # i (1 - j^2)
            torch.mul(c, torch.addcmul(f, f, f, value=-1.0), out=by_cell[2, :, rows])  # c' f (1 - f)
            torch.mul(cell_step.cell_tanh, torch.addcmul(o, o, o, value=-1.0), out=by_hidden_o[:, rows])
            torch.addcmul(o, o, cell_step.cell_tanh * cell_step.cell_tanh, value=-1.0, out=hidden_to_cell[:, rows])
            forget_gates[:, rows] = f
            if cell_passes is not None:  # (cell_clip is set) clamp's gradient passes where the unclipped value
                # lies within the clip, bounds included: exactly where the clipped cell equals it
                torch.eq(cell_step.cell, cell_step.cell_unclipped, out=cell_passes[:, rows])
            hidden[:, rows] = cell_step.hidden
            if project is not None:
                project(hidden[:, rows], out=outputs_unclipped[:, rows])
                if proj_clip:
                    torch.clamp(outputs_unclipped[:, rows], -proj_clip, proj_clip, out=outputs[:, rows])
            h, c = outputs[:, rows], cell_step.cell
        output_passes = None
        if proj_clip and project is not None:
            output_passes = outputs_unclipped.abs() <= proj_clip
        ctx.n_rows, ctx.product_dtype = n_rows, product_dtype
        ctx.save_for_backward(inputs, h0, c0, input_weight, recurrent_weight, bias, projection, by_cell, by_hidden_o,
                              hidden_to_cell, forget_gates, cell_passes, hidden, outputs, output_passes)
        return outputs, h.clone(), c.clone()

    @staticmethod
    def backward(ctx: Any, d_outputs: torch.Tensor, d_h_last: torch.Tensor,
                 d_c_last: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        with torch.no_grad():
            gradients = PairedLstmLayer.first_order_backward(ctx, d_outputs, d_h_last, d_c_last)
        return first_order_only(gradients, [*ctx.saved_tensors, d_outputs, d_h_last, d_c_last], _SECOND_ORDER_REFUSED)

    @staticmethod
    def first_order_backward(ctx: Any, d_outputs: torch.Tensor, d_h_last: torch.Tensor,
                             d_c_last: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """The gradients of ``forward``'s inputs, computed without autograd."""
        (inputs, h0, _c0, input_weight, recurrent_weight, _bias, projection, by_cell, by_hidden_o, hidden_to_cell,
         forget_gates, cell_passes, hidden, outputs, output_passes) = ctx.saved_tensors
        n_rows, product_dtype = ctx.n_rows, ctx.product_dtype
        n_positions, dim = inputs.shape[1], forget_gates.shape[2]
        # Every step's gate gradients, for the products after the loop: with a product_dtype in that type, a
        # step's computed in float32 in a buffer of one step's size (and the bias gradient summed from it).
        low = product_dtype is not None
        d_gates = inputs.new_empty((2, n_positions, 4 * dim), dtype=product_dtype if low else inputs.dtype)
        step_d_gates = inputs.new_empty((2, n_rows, 4 * dim)) if low else None
        d_bias = inputs.new_zeros((2, 4 * dim)) if low else None
        d_outputs_unclipped = torch.empty_like(d_outputs) if projection is not None else None
        recurrent_t = _PairProduct(recurrent_weight.transpose(1, 2), product_dtype)
        projection_t = _PairProduct(projection.transpose(1, 2), product_dtype) if projection is not None else None
        d_h = d_h_last.clone()  # at the step's (clipped) output h
        d_c = d_c_last.clone()  # at the step's (clipped) cell c
        for step in reversed(range(n_positions // n_rows)):
            rows = slice(step * n_rows, (step + 1) * n_rows)
            d_h.add_(d_outputs[:, rows])
            if output_passes is not None:
                d_h.mul_(output_passes[:, rows])
            if projection_t is not None and d_outputs_unclipped is not None:  # both or neither
                d_outputs_unclipped[:, rows] = d_h
                d_hidden = projection_t(d_h)
            else:
                d_hidden = d_h
            d_c.addcmul_(d_hidden, hidden_to_cell[:, rows])
            if cell_passes is not None:
                d_c.mul_(cell_passes[:, rows])  # now at the unclipped cell
            d_step_gates = d_gates[:, rows] if step_d_gates is None else step_d_gates
            torch.mul(d_hidden, by_hidden_o[:, rows], out=d_step_gates[:, :, 3 * dim :])
            for gate in range(3):  # i, j, f
                torch.mul(d_c, by_cell[gate, :, rows], out=d_step_gates[:, :, gate * dim : (gate + 1) * dim])
            if d_bias is not None:
                d_bias += d_step_gates.sum(dim=1)
                d_gates[:, rows] = d_step_gates
            d_c.mul_(forget_gates[:, rows])
            d_h = recurrent_t(d_gates[:, rows])
        # Both weights' gradients as one product: [inputs, previous outputs] side by side.
        previous_outputs = torch.cat([h0, outputs[:, : n_positions - n_rows]], dim=1)
        d_weights = product(d_gates.transpose(1, 2), torch.cat([inputs, previous_outputs], dim=2), product_dtype)
        d_input_weight, d_recurrent_weight = d_weights.split([inputs.shape[2], previous_outputs.shape[2]], dim=2)
        if d_bias is None:
            d_bias = d_gates.sum(dim=1)
        d_projection = None
        if d_outputs_unclipped is not None:  # there is a projection
            d_projection = product(d_outputs_unclipped.transpose(1, 2), hidden, product_dtype)
        d_inputs = product(d_gates, input_weight, product_dtype)
        return (d_inputs, d_h, d_c, None, None, None, None, d_input_weight, d_recurrent_weight, d_bias,
                d_projection)


_SECOND_ORDER_REFUSED = (
    "the paired LSTM kernel (modules/paired_lstm.py), which runs when a gradient is wanted and every row has the "
    "same length, gives first-order gradients only; for gradients of gradients (create_graph=True) set "
    "reference_kernels = True on the BiLM (or the LanguageModel) to run autograd through the step loop "
    "(docs/model.md, 'How the LSTM layers run')")


def paired_lstm_layer(inputs: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, n_rows: int, weights: PairWeights,
                      cell_clip: float, proj_clip: float, product_dtype: torch.dtype | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One layer over both directions: see ``PairedLstmLayer``; ``product_dtype`` (``modules/low_precision.py``):
    the type its matrix products run in, None for the operands' own."""
    return PairedLstmLayer.apply(inputs, h0, c0, n_rows, cell_clip, proj_clip, product_dtype, *weights)


def pair_weights(forward_layer: ProjectedLstm, backward_layer: ProjectedLstm) -> PairWeights:
    """Both directions' parameters of one layer, stacked (an autograd operation: gradients reach each layer)."""
    projection = None
    if forward_layer.projection is not None and backward_layer.projection is not None:
        projection = torch.stack([forward_layer.projection, backward_layer.projection])
    return PairWeights(
        torch.stack([forward_layer.input_weight, backward_layer.input_weight]),
        torch.stack([forward_layer.recurrent_weight, backward_layer.recurrent_weight]),
        torch.stack([forward_layer.gate_bias(), backward_layer.gate_bias()]),
        projection,
    )
