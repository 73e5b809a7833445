"""Linear layers for inference on CPU: oneDNN's matrix product on a weight it has reordered once.

PyTorch's ``F.linear`` goes through MKL, which repacks its weight matrix on every call; for the few rows of one
time step that repacking is most of the work. oneDNN reorders the weight once into its own blocked layout and
keeps the copy, at the cost of holding each weight twice in memory (figures: docs/performance.md).

oneDNN's product has no backward. So the reordered weight is used only when no gradient is wanted through the
product: under ``no_grad`` or ``inference_mode``, or for a frozen module whose inputs need no gradient. It
also needs a CPU float32 tensor. Otherwise the usual products run, so training is unchanged. The results
equal ``F.linear``'s to float32 rounding: the sums are taken in another order (``tests/test_prepacked.py``).

The two oneDNN operators (``torch.ops.mkldnn._reorder_linear_weight`` and ``_linear_pointwise``) and the count
of in-place updates that tells a cached copy is stale (``Tensor._version``, ``elmo.modules.weight_changes``) are
private PyTorch APIs, each behind a flag read when a product runs: where a PyTorch lacks one, the products are
``F.linear``'s (docs/performance.md, "PyTorch versions").
"""

from collections.abc import Callable

import torch
import torch.nn.functional as F

from elmo.modules.weight_changes import WeightsKey, weights_key

HAS_ONEDNN = torch.backends.mkldnn.is_available() and all(
    hasattr(torch.ops.mkldnn, name) for name in ("_reorder_linear_weight", "_linear_pointwise"))


def can_reorder(tensor: torch.Tensor) -> bool:
    """Whether oneDNN may hold a reordered copy of ``tensor``: this PyTorch has the operators; CPU float32."""
    return HAS_ONEDNN and tensor.device.type == "cpu" and tensor.dtype == torch.float32


class PrepackedWeight:
    """One weight's reordered copy, remade when the weight changes (``elmo.modules.weight_changes``)."""

    def __init__(self) -> None:
        self.key: WeightsKey | None = None
        self.packed: torch.Tensor | None = None

    def __getstate__(self) -> dict:
        """Copies and pickles of a module start without the reordered copy (oneDNN's tensor can be neither),
        which is made again when first needed."""
        return {"key": None, "packed": None}

    def get(self, inputs: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor | None:
        """The reordered ``weight`` if ``inputs @ weight.T + bias`` may run from it, else None."""
        return self.get_derived(inputs, [weight], weight.detach, also_used=[] if bias is None else [bias])

    def get_derived(self, inputs: torch.Tensor, parameters: list[torch.Tensor], build: Callable[[], torch.Tensor],
                    also_used: list[torch.Tensor] | None = None) -> torch.Tensor | None:
        """The reordered copy of the weight ``build()`` makes from ``parameters``, if ``inputs`` (and the
        product's ``also_used`` tensors) may use it, else None. It is made again only when one of ``parameters``
        has changed since."""
        key = weights_key(parameters) if may_run(inputs, [*parameters, *(also_used or [])]) else None
        if key is None:
            if not all(can_reorder(parameter) for parameter in parameters):  # moved or cast: the copy and the
                self.key = self.packed = None  # old weights its key holds would stay in memory for nothing
            return None
        if key != self.key or self.packed is None:
            self.packed = torch.ops.mkldnn._reorder_linear_weight(build())
            self.key = key
        return self.packed


def may_run(inputs: torch.Tensor, parameters: list[torch.Tensor]) -> bool:
    """Whether a product of ``inputs`` and weights made from ``parameters`` may run on oneDNN's reordered copy:
    CPU float32, no gradient wanted through it, and no ``torch.autocast`` for the CPU (oneDNN's operators have no
    autocast rule: under it the output stayed float32 without autograd and followed the casts with it)."""
    tensors = [inputs, *parameters]
    if not all(can_reorder(tensor) for tensor in tensors) or torch.is_autocast_enabled("cpu"):
        return False
    if torch.compiler.is_compiling():  # not while exporting
        return False
    return not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors))


def prepacked_product(inputs: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``inputs @ weight.T + bias`` from ``PrepackedWeight.get``'s copy of ``weight``."""
    return torch.ops.mkldnn._linear_pointwise(inputs, packed, bias, "none", [], "")


def linear(inputs: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
           prepacked: PrepackedWeight) -> torch.Tensor:
    """``F.linear(inputs, weight, bias)``, from the reordered weight where ``prepacked`` allows it."""
    packed = prepacked.get(inputs, weight, bias)
    if packed is None:
        return F.linear(inputs, weight, bias)
    return prepacked_product(inputs, packed, bias)


class ReorderedWeight:
    """``inputs @ weight.T + bias`` for a weight that a hand-written forward or backward (no autograd) multiplies
    by several times: on CPU float32 from oneDNN's copy of ``weight``, reordered once when this is made. Worth it
    for products with many rows against a wide weight, where the reorder is small next to the products (the
    sampled softmax)."""

    def __init__(self, weight: torch.Tensor) -> None:
        self.weight = weight
        self.packed = None
        if can_reorder(weight):
            self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.contiguous())

    def __call__(self, inputs: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        if self.packed is None or inputs.dtype != torch.float32:
            return F.linear(inputs, self.weight, bias)
        return prepacked_product(inputs, self.packed, bias)
