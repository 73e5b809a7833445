"""Both directions of the biLM, each over its own packed stream: the one runner that inference, continuous
batching and training call, and the one place that picks how the LSTM layers run.

The two streams hold the same number of positions with the same ``batch_sizes`` (and ``restarts``): the backward
stream reads each sequence from its end. They come stacked, ``(2, positions, dim)``, forward first.

Kernels (docs/model.md):

- ``paired``: training with full rows (every row runs every step, no restarts): both directions' layers side by
  side with a hand-written backward (``modules/paired_lstm.py``). CPU and GPU.
- ``fused``: a model without clipping and no restarts: PyTorch's own LSTM per direction (cuDNN on a GPU).
- ``step-loop``: everything else, per direction (``ProjectedLstm.forward``): on CPU without autograd its products
  run on oneDNN's reordered weights (``modules/prepacked.py``); with autograd it is the statement of the equations
  that the other kernels are tested against. Also under ``torch.autocast``, where only its operations follow
  autocast's casts: the paired kernel's hand-written products would meet float32 weights with bfloat16 or
  float16 gradients, and the fused LSTM would return another dtype than its input's.
"""

import functools
from collections.abc import Callable
from enum import StrEnum
from typing import NamedTuple

import torch

from elmo.modules.lstm import LstmStack, LstmState
from elmo.modules.paired_lstm import pair_weights, paired_lstm_layer

# (direction, layer index, that direction's packed layer input) -> the input with dropout applied
Dropout = Callable[[int, int, torch.Tensor], torch.Tensor]


class Kernel(StrEnum):
    PAIRED = "paired"
    FUSED = "fused"
    STEP_LOOP = "step-loop"


class DirectionsOutput(NamedTuple):
    """``layers``: each LSTM layer's outputs ``(2, positions, projection_dim)``; ``h`` ``(2, n_layers, rows,
    projection_dim)`` and ``c`` ``(2, n_layers, rows, dim)``: the state where each row stopped."""

    layers: list[torch.Tensor]
    h: torch.Tensor
    c: torch.Tensor


def pick_kernel(stack: LstmStack, inputs: torch.Tensor, batch_sizes: list[int],
                restarts: dict[int, torch.Tensor] | None, reference: bool = False) -> Kernel:
    """How the layers of ``stack`` (either direction's: both have the same shape) run over ``inputs``."""
    if reference or torch.is_autocast_enabled(inputs.device.type):
        return Kernel.STEP_LOOP
    wants_grad = torch.is_grad_enabled() and (inputs.requires_grad or any(p.requires_grad for p in stack.parameters()))
    full_rows = not restarts and all(n_alive == batch_sizes[0] for n_alive in batch_sizes)
    if wants_grad and full_rows and batch_sizes:
        return Kernel.PAIRED
    if all(layer.fuses for layer in stack.layers) and not restarts and batch_sizes:
        return Kernel.FUSED
    return Kernel.STEP_LOOP


def run_directions(forward_stack: LstmStack, backward_stack: LstmStack, inputs: torch.Tensor, batch_sizes: list[int],
                   h0: torch.Tensor, c0: torch.Tensor, restarts: dict[int, torch.Tensor] | None = None,
                   input_dropout: Dropout | None = None,
                   reference: bool = False, product_dtype: torch.dtype | None = None) -> DirectionsOutput:
    """Both stacks over ``inputs (2, positions, input_dim)``, packed time-major as ``modules/lstm.py`` describes,
    from ``h0 (2, n_layers, rows, projection_dim)`` and ``c0 (2, n_layers, rows, dim)``.

    ``input_dropout(direction, layer_index, layer_input (positions, width))``, in training, replaces each layer's
    input before the layer and its skip connection read it. ``reference`` forces the step loop.
    ``product_dtype`` (``modules/low_precision.py``): the type the paired layers' matrix products run in.
    """
    kernel = pick_kernel(forward_stack, inputs, batch_sizes, restarts, reference)
    if kernel is Kernel.PAIRED:
        return _run_paired(forward_stack, backward_stack, inputs, batch_sizes[0], h0, c0, input_dropout,
                           product_dtype)
    directions = []
    for direction, stack in enumerate((forward_stack, backward_stack)):
        dropout = None if input_dropout is None else functools.partial(input_dropout, direction)
        states = [LstmState(h0[direction, k], c0[direction, k]) for k in range(len(stack.layers))]
        directions.append(stack(inputs[direction], batch_sizes, states, dropout, restarts, kernel is Kernel.FUSED))
    layers = [torch.stack(pair) for pair in zip(*(outputs for outputs, _ in directions), strict=True)]
    h = torch.stack([torch.stack([state.h for state in finals]) for _, finals in directions])
    c = torch.stack([torch.stack([state.c for state in finals]) for _, finals in directions])
    return DirectionsOutput(layers, h, c)


def _run_paired(forward_stack: LstmStack, backward_stack: LstmStack, inputs: torch.Tensor, n_rows: int,
                h0: torch.Tensor, c0: torch.Tensor,
                input_dropout: Dropout | None, product_dtype: torch.dtype | None) -> DirectionsOutput:
    layer_outputs, finals_h, finals_c = [], [], []
    layer_input = inputs
    for index, (forward_layer, backward_layer) in enumerate(zip(forward_stack.projected_lstms(),
                                                                backward_stack.projected_lstms(), strict=True)):
        if input_dropout is not None:
            layer_input = torch.stack([input_dropout(direction, index, layer_input[direction]) for direction in (0, 1)])
        output, h, c = paired_lstm_layer(layer_input, h0[:, index], c0[:, index], n_rows,
                                         pair_weights(forward_layer, backward_layer), forward_layer.cell_clip,
                                         forward_layer.proj_clip, product_dtype)
        if index > 0 and forward_stack.use_skip_connections:
            output = output + layer_input
        layer_outputs.append(output)
        finals_h.append(h)
        finals_c.append(c)
        layer_input = output
    return DirectionsOutput(layer_outputs, torch.stack(finals_h, dim=1), torch.stack(finals_c, dim=1))
