"""One direction of the biLM: a stack of LSTMs with projection, clipping and skip connections.

Sequences come packed time-major, as in ``torch.nn.utils.rnn.PackedSequence``: rows sorted by length,
``batch_sizes[t]`` rows alive at step t, their step-t inputs contiguous in ``packed[offset_t:]``. That
lets the input-to-gate weights run once over every real token in one matrix product, leaves only the
recurrent product in the time loop, and never computes a padded position.

State is explicit: each layer takes ``(h, c)`` for every row and returns the state at each row's own
last step, so nothing is carried between calls unless the caller passes it back in. A row may also run
several sequences one after another (``elmo/lanes.py``): ``restarts`` names the steps where a row's
state goes back to zeros.

The input-to-gate products run over blocks of whole steps of at most ``_GATE_ROWS`` rows, so their
memory stays bounded however many steps a call runs (32 MiB for the original model's 16,384 gates).
"""

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, cast

import torch
import torch.nn.functional as F
from torch import nn

from elmo.config import LSTMConfig
from elmo.modules.prepacked import PrepackedWeight, linear, prepacked_product

# Output columns per block in the per-step products (see _step_linear).
_BLOCK = 256
# Rows per input-to-gate product: bounds the gates' memory and keeps them in cache (measured: docs/performance.md).
_GATE_ROWS = 512


def _step_linear(inputs: torch.Tensor, weight: torch.Tensor, addend: torch.Tensor | None = None) -> torch.Tensor:
    """``addend + F.linear(inputs, weight)`` for the few rows of one time step, as 256-column block products.

    With few rows, BLAS runs one wide product far below its peak; as a batch of narrow blocks the same product
    runs faster (measured: docs/performance.md). The blocks are views of the weight, and the addition puts the
    blocks back in order. A CPU trick: on a GPU the plain product runs.
    """
    n_rows, (n_out, n_in) = inputs.shape[0], weight.shape
    if n_out % _BLOCK or n_out == _BLOCK or inputs.device.type != "cpu":
        product = F.linear(inputs, weight)
        return product if addend is None else addend + product
    blocks = weight.view(n_out // _BLOCK, _BLOCK, n_in).transpose(1, 2)  # (n_blocks, n_in, _BLOCK)
    product = torch.matmul(inputs, blocks).transpose(0, 1)  # (n_rows, n_blocks, _BLOCK), not contiguous
    if addend is None:
        return product.reshape(n_rows, n_out)
    return (addend.view(n_rows, n_out // _BLOCK, _BLOCK) + product).view(n_rows, n_out)


def _step_product(inputs: torch.Tensor, weight: torch.Tensor, prepacked: PrepackedWeight,
                  addend: torch.Tensor | None = None) -> torch.Tensor:
    """``addend + F.linear(inputs, weight)`` for one time step: from oneDNN's reordered weight where it may run
    (inference on CPU, see ``modules/prepacked.py``), else as block products."""
    packed = prepacked.get(inputs, weight)
    if packed is None:
        return _step_linear(inputs, weight, addend)
    product = prepacked_product(inputs, packed)
    return product if addend is None else product.add_(addend)  # a new tensor, no autograd: add in place


def _gate_block_rows(batch_sizes: list[int]) -> int:
    """Rows of the whole steps, from the first of ``batch_sizes`` on, that fit in ``_GATE_ROWS`` (one at least)."""
    rows = batch_sizes[0]
    for n_alive in batch_sizes[1:]:
        if rows + n_alive > _GATE_ROWS:
            break
        rows += n_alive
    return rows


def fast_tanh(x: torch.Tensor) -> torch.Tensor:
    """tanh, the faster way on this CPU where no gradient is wanted: PyTorch's, or ``tanh_by_sigmoid``.

    PyTorch's float tanh on CPU is MKL's vector tanh where PyTorch is built with MKL (ATen's ``vml.h``), and MKL
    runs its fast code on Intel's CPUs only: there it is faster than the identity, elsewhere slower, and the cell
    takes two a step (measured: docs/performance.md, ``benchmarks/tanh_choice.py``). In float16 or
    bfloat16 the identity's error is a step of the format near 0.5, not of the result (small values come out 0),
    so those use tanh.
    """
    if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64) or \
            (torch.is_grad_enabled() and x.requires_grad) or mkl_tanh_is_fast():
        return torch.tanh(x)
    return tanh_by_sigmoid(x)


def tanh_by_sigmoid(x: torch.Tensor) -> torch.Tensor:
    """tanh as ``2 sigmoid(2x) - 1``: agrees with tanh to float32 rounding (``tests/test_fast_path_reference.py``)."""
    return torch.sigmoid(2.0 * x).mul_(2.0).sub_(1.0)


@functools.cache
def mkl_tanh_is_fast() -> bool:
    """Whether ``torch.tanh`` on CPU runs MKL's code for Intel's CPUs: PyTorch has MKL and ``/proc/cpuinfo`` names
    an Intel CPU (where it cannot be read, as on macOS, no)."""
    if not torch.backends.mkl.is_available():
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            return any(line.split(":", 1)[-1].strip() == "GenuineIntel"
                       for line in cpuinfo if line.startswith("vendor_id"))
    except OSError:
        return False


class CellStep(NamedTuple):
    """One step of the cell: the memory before and after its clip, the hidden output ``o * tanh(c)``, and the
    activations on the way (what a hand-written backward needs)."""

    cell_unclipped: torch.Tensor
    cell: torch.Tensor
    hidden: torch.Tensor
    input_gate: torch.Tensor  # sigmoid(i)
    candidate: torch.Tensor  # tanh(j)
    forget_gate: torch.Tensor  # sigmoid(f)
    output_gate: torch.Tensor  # sigmoid(o)
    cell_tanh: torch.Tensor  # tanh(c)


def lstm_cell(gates: torch.Tensor, previous_cell: torch.Tensor, cell_clip: float,
              tanh: Callable[[torch.Tensor], torch.Tensor] = fast_tanh) -> CellStep:
    """TF's ``LSTMCell`` after its products: the one statement of the cell that every runner calls.

    ``gates`` ``(..., 4 * dim)``: ``W x + U h + b`` in TF's order i, j (candidate), f, o, the forget bias included;
    ``previous_cell`` ``(..., dim)``. ``c = sigmoid(f) * c' + sigmoid(i) * tanh(j)``, clipped to ``+-cell_clip``
    (0: no clip); ``hidden = sigmoid(o) * tanh(c)``, from the clipped ``c``.
    """
    i, j, f, o = gates.chunk(4, dim=-1)
    input_gate, candidate, forget_gate, output_gate = torch.sigmoid(i), tanh(j), torch.sigmoid(f), torch.sigmoid(o)
    cell_unclipped = forget_gate * previous_cell + input_gate * candidate
    cell = cell_unclipped.clamp(-cell_clip, cell_clip) if cell_clip else cell_unclipped
    cell_tanh = tanh(cell)
    return CellStep(cell_unclipped, cell, output_gate * cell_tanh, input_gate, candidate, forget_gate, output_gate,
                    cell_tanh)


class LstmState(NamedTuple):
    """``h``: ``(batch, projection_dim)`` output (projected, clipped); ``c``: ``(batch, dim)`` memory cell."""

    h: torch.Tensor
    c: torch.Tensor


class ProjectedLstm(nn.Module):
    """An LSTM layer with TF's ``LSTMCell`` semantics (as bilm-tf trained it).

    Gates ``W x + U h + b`` in TF's order i, j (candidate), f, o, with TF's forget bias of 1.0 added to f
    at run time (the stored ``bias`` excludes it, as in the weight files); ``c`` clipped to
    ``+-cell_clip``; ``h = o * tanh(c)``, projected without bias and clipped to ``+-proj_clip``. The
    clipped values are what the next step sees. A clip of 0 means no clipping.
    """

    FORGET_BIAS = 1.0

    def __init__(
        self, input_dim: int, dim: int, projection_dim: int, cell_clip: float, proj_clip: float
    ) -> None:
        super().__init__()
        self.dim = dim
        self.output_dim = projection_dim
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip
        self.input_weight = nn.Parameter(torch.empty(4 * dim, input_dim))
        self.recurrent_weight = nn.Parameter(torch.empty(4 * dim, projection_dim))
        self.bias = nn.Parameter(torch.zeros(4 * dim))
        self.projection = (
            nn.Parameter(torch.empty(projection_dim, dim)) if projection_dim < dim else None
        )
        self._prepacked_input = PrepackedWeight()
        self._prepacked_recurrent = PrepackedWeight()
        self._prepacked_projection = PrepackedWeight()
        for weight in (self.input_weight, self.recurrent_weight, self.projection):
            if weight is not None:
                nn.init.xavier_uniform_(weight)

    def gate_bias(self) -> torch.Tensor:
        """The bias the gates add: the stored one with TF's forget bias added to f (weight files store it without)."""
        forget_bias = torch.zeros_like(self.bias)
        forget_bias[2 * self.dim : 3 * self.dim] = self.FORGET_BIAS
        return self.bias + forget_bias

    @property
    def fuses(self) -> bool:
        """Without clipping the cell is PyTorch's own LSTM's, which may then run it (``fused=True``)."""
        return not self.cell_clip and not (self.proj_clip and self.projection is not None)

    def forward(
        self, packed_inputs: torch.Tensor, batch_sizes: list[int], state: LstmState,
        restarts: dict[int, torch.Tensor] | None = None, fused: bool = False,
    ) -> tuple[torch.Tensor, LstmState]:
        """``packed_inputs (n_real_tokens, input_dim)`` -> ``(n_real_tokens, output_dim)`` and final state.

        ``restarts`` maps a step to the rows (of that step) whose state is set to zeros before it. ``fused`` runs
        PyTorch's own LSTM instead of the step loop (``modules/bidirectional.py`` decides).
        """
        bias = self.gate_bias()
        if fused:
            if not self.fuses or restarts:
                raise ValueError("PyTorch's fused LSTM neither clips nor restarts rows")
            return self._fused(packed_inputs, batch_sizes, state, bias)

        h, c = state
        finished_h: list[torch.Tensor] = []  # rows whose sequence ended, last first
        finished_c: list[torch.Tensor] = []
        outputs: list[torch.Tensor] = []
        offset = block_start = block_end = 0
        for step, n_alive in enumerate(batch_sizes):
            if n_alive < h.shape[0]:
                finished_h.append(h[n_alive:])
                finished_c.append(c[n_alive:])
                h, c = h[:n_alive], c[:n_alive]
            if restarts and step in restarts:
                h = h.index_fill(0, restarts[step], 0.0)
                c = c.index_fill(0, restarts[step], 0.0)
            if offset == block_end:
                block_start, block_end = offset, offset + _gate_block_rows(batch_sizes[step:])
                input_gates = linear(packed_inputs[block_start:block_end], self.input_weight, bias,
                                     self._prepacked_input)
            gates = _step_product(h, self.recurrent_weight, self._prepacked_recurrent,
                                  input_gates[offset - block_start : offset - block_start + n_alive])
            offset += n_alive
            cell_step = lstm_cell(gates, c, self.cell_clip)
            c, h = cell_step.cell, cell_step.hidden
            if self.projection is not None:
                h = _step_product(h, self.projection, self._prepacked_projection)
                if self.proj_clip:
                    h = h.clamp(-self.proj_clip, self.proj_clip)
            outputs.append(h)
        final_h = torch.cat([h, *reversed(finished_h)])
        final_c = torch.cat([c, *reversed(finished_c)])
        packed_outputs = torch.cat(outputs) if outputs else packed_inputs.new_zeros((0, self.output_dim))
        return packed_outputs, LstmState(final_h, final_c)

    def _fused(
        self, packed_inputs: torch.Tensor, batch_sizes: list[int], state: LstmState, bias: torch.Tensor
    ) -> tuple[torch.Tensor, LstmState]:
        """Without clipping the cell is PyTorch's own LSTM (cuDNN on CUDA, one fused C++ loop on CPU).

        PyTorch orders the gates i, f, g(=j), o; TF i, j, f, o. The forget bias goes into ``b_ih``.
        """

        def to_torch_order(tensor: torch.Tensor) -> torch.Tensor:
            i, j, f, o = tensor.chunk(4, dim=0)
            return torch.cat([i, f, j, o])

        weights = [
            to_torch_order(self.input_weight),
            to_torch_order(self.recurrent_weight),
            to_torch_order(bias),
            torch.zeros_like(bias),
        ]
        if self.projection is not None:
            weights.append(self.projection)
        sizes = torch.tensor(batch_sizes, dtype=torch.long)
        with _cudnn_in_full_float32() if packed_inputs.is_cuda else contextlib.nullcontext():
            outputs, h, c = torch.lstm(
                packed_inputs, sizes, (state.h[None], state.c[None]), weights, True, 1, 0.0, self.training, False
            )
        return outputs, LstmState(h[0], c[0])


@contextlib.contextmanager
def _cudnn_in_full_float32() -> Iterator[None]:
    """cuDNN runs float32 RNNs in TF32 by PyTorch's default, which moves the vectors by about 1e-3 as it did the
    char CNN's: inside, its products run in full float32, its other settings as they are. PyTorch has two settings
    for it that refuse to be mixed: the older ``allow_tf32``, and the newer ``fp32_precision`` (of
    ``torch.backends`` and below), once a caller set which the older one refuses to be read. Each is set here as the
    caller's process uses them; the CPU, which has no cuDNN, touches neither (the older one raised there)."""
    cudnn = torch.backends.cudnn
    try:
        cudnn.allow_tf32  # noqa: B018 (read to learn which setting the process uses)
    except RuntimeError:
        rnn: Any = cudnn.rnn  # its settings are module attributes that PyTorch's stubs do not declare
        before = rnn.fp32_precision
        rnn.fp32_precision = "ieee"
        try:
            yield
        finally:
            rnn.fp32_precision = before
        return
    with cudnn.flags(enabled=cudnn.enabled, benchmark=cudnn.benchmark, deterministic=cudnn.deterministic,
                     allow_tf32=False):
        yield


class LstmStack(nn.Module):
    """``n_layers`` ProjectedLstms; layers >= 1 add their input to their output (outside the recurrence)
    when ``use_skip_connections``, as TF's ResidualWrapper does.
    """

    def __init__(self, config: LSTMConfig, input_dim: int) -> None:
        super().__init__()
        output_dim = config.projection_dim
        self.use_skip_connections = config.use_skip_connections
        self.layers = nn.ModuleList(
            ProjectedLstm(
                input_dim if index == 0 else output_dim,
                config.dim,
                output_dim,
                config.cell_clip,
                config.proj_clip,
            )
            for index in range(config.n_layers)
        )

    def projected_lstms(self) -> list[ProjectedLstm]:
        """``layers``, typed as the ProjectedLstms they are (a ModuleList's items are typed as plain Modules)."""
        return cast("list[ProjectedLstm]", list(self.layers))

    def forward(
        self,
        packed_inputs: torch.Tensor,
        batch_sizes: list[int],
        states: list[LstmState],
        input_dropout: Callable[[int, torch.Tensor], torch.Tensor] | None = None,
        restarts: dict[int, torch.Tensor] | None = None,
        fused: bool = False,
    ) -> tuple[list[torch.Tensor], list[LstmState]]:
        """Returns each layer's packed output ``(n_real_tokens, projection_dim)`` and each layer's state.

        ``input_dropout(layer_index, layer_input)``, given in training only, replaces each layer's input
        before the layer and its skip connection read it (bilm-tf's DropoutWrapper around ResidualWrapper).
        ``restarts`` and ``fused``, as ``ProjectedLstm.forward`` takes them, hold for every layer.
        """
        layer_outputs: list[torch.Tensor] = []
        final_states: list[LstmState] = []
        layer_input = packed_inputs
        for index, (layer, state) in enumerate(zip(self.layers, states, strict=True)):
            if input_dropout is not None:
                layer_input = input_dropout(index, layer_input)
            output, final_state = layer(layer_input, batch_sizes, state, restarts, fused)
            if index > 0 and self.use_skip_connections:
                output = output + layer_input
            layer_outputs.append(output)
            final_states.append(final_state)
            layer_input = output
        return layer_outputs, final_states
