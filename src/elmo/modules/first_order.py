"""Gradients that must not be differentiated again, refused loudly.

The hand-written backward passes (the paired LSTM kernel, the sampled softmax) compute first-order gradients
without autograd. PyTorch's ``once_differentiable`` hangs its refusal on detached copies, so ``autograd.grad``
with respect to the weights never meets it, nor does any gradient whose incoming gradients need no grad (a loss
linear in the outputs): their second-order terms came out as zero, silently. ``first_order_only`` instead routes
the gradients, when autograd records the backward (``create_graph=True``), through a node whose inputs include
every tensor they were computed from, and whose own backward raises.
"""

from typing import Any

import torch


def first_order_only(gradients: tuple[torch.Tensor | None, ...], computed_from: list[torch.Tensor | None],
                     refusal: str) -> tuple[torch.Tensor | None, ...]:
    """``gradients`` unchanged; under ``create_graph``, differentiating them raises ``RuntimeError(refusal)``."""
    if not torch.is_grad_enabled():  # no create_graph: nothing will differentiate these gradients
        return gradients
    computed = [gradient for gradient in gradients if gradient is not None]
    sources = [tensor for tensor in computed_from if tensor is not None]
    refusing = iter(_FirstOrderOnly.apply(refusal, len(computed), *computed, *sources))
    return tuple(None if gradient is None else next(refusing) for gradient in gradients)


class _FirstOrderOnly(torch.autograd.Function):
    """``(refusal, n, *gradients, *computed_from) -> gradients``, in a node that refuses to be differentiated."""

    @staticmethod
    def forward(ctx: Any, refusal: str, n_gradients: int, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ctx.refusal = refusal
        return tuple(gradient.view_as(gradient) for gradient in tensors[:n_gradients])

    @staticmethod
    def backward(ctx: Any, *d_gradients: torch.Tensor) -> tuple[torch.Tensor, ...]:
        raise RuntimeError(ctx.refusal)
