"""The task-specific mix of ELMo layers: ``gamma * sum_j softmax(s)_j * h_j`` (Peters et al. 2018, eq. 1)."""

from collections.abc import Sequence

import torch
from torch import nn


class ScalarMix(nn.Module):
    """Mixes ``(n_layers, batch, time, dim)`` layers into ``(batch, time, dim)``.

    ``s`` (``scalars``) and ``gamma`` are learned unless ``trainable=False``; ``initial_scalars`` default to
    zeros (an even average). With ``layer_norm``, each layer is first normalized by the mean and variance
    of its unmasked entries over the whole batch, as AllenNLP did (the paper's option for some tasks), so a
    sentence's mix then depends on its batch-mates; masked positions come out as zeros.

    ``l2`` weighs ``regularization()``, a term for the task's loss (0.001 in the paper):
    ``l2 * ||softmax(s) - 1/n||^2``, the paper's ``lambda * ||w||^2`` read on the softmax-normalized weights ``w``
    (the same up to the constant ``l2 / n``, as ``w`` sums to 1). bilm-tf's ``weight_layers`` reads it on the raw,
    pre-softmax scalars instead: ``l2_coef * sum(s^2)``. At the same coefficient the two differ a lot: this term's
    gradient vanishes as the softmax saturates, so it hardly pulls back a mix that one layer dominates (at
    ``s = [10, 0, 0]`` and 0.001, a gradient of at most 1.8e-7 on ``s`` against bilm-tf's 2e-2), while bilm-tf's
    grows with ``s``. The task results in docs/results.md were measured with this reading.
    """

    def __init__(
        self,
        n_layers: int,
        initial_scalars: Sequence[float] | None = None,
        initial_gamma: float = 1.0,
        trainable: bool = True,
        layer_norm: bool = False,
        l2: float = 0.0,
    ) -> None:
        super().__init__()
        scalars = [0.0] * n_layers if initial_scalars is None else list(initial_scalars)
        if len(scalars) != n_layers:
            raise ValueError(f"initial_scalars has {len(scalars)} values; the biLM has {n_layers} layers")
        self.scalars = nn.Parameter(torch.tensor(scalars, dtype=torch.float32), requires_grad=trainable)
        self.gamma = nn.Parameter(torch.tensor(float(initial_gamma)), requires_grad=trainable)
        self.layer_norm = layer_norm
        self.l2 = l2

    def forward(self, layers: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if layers.shape[0] != self.scalars.shape[0]:
            raise ValueError(f"got {layers.shape[0]} layers; this mix has {self.scalars.shape[0]}")
        weights = torch.softmax(self.scalars, dim=0).to(layers.dtype)
        if self.layer_norm:
            if mask is None:
                raise ValueError("layer_norm needs the mask of real tokens")
            layers = _normalize_over_mask(layers, mask)
        return self.gamma.to(layers.dtype) * torch.einsum("l,lbtd->btd", weights, layers)

    def regularization(self) -> torch.Tensor:
        """``l2 * ||softmax(s) - 1/n_layers||^2``, to add to the loss (zero for fixed weights or ``l2=0``): the paper's
        ``lambda * ||w||^2`` on the softmax weights, not bilm-tf's on the raw ``s`` (see the class)."""
        if not self.l2 or not self.scalars.requires_grad:
            return torch.zeros(())
        weights = torch.softmax(self.scalars, 0)
        return self.l2 * ((weights - 1.0 / weights.numel()) ** 2).sum()


def _normalize_over_mask(layers: torch.Tensor, mask: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Each layer minus its mean, over its standard deviation, both taken over the batch's real tokens only;
    zeros at masked positions (and everywhere in a batch without a real token). The statistics are taken in
    float32 at least: in float16 the count of tokens x dim passes 65,504 at 64 tokens of 1,024 and ``eps``
    rounds to zero, which made every output NaN."""
    values = layers.to(torch.promote_types(layers.dtype, torch.float32))
    weights = mask[None, :, :, None].to(values.dtype)
    count = (weights.sum() * values.shape[-1]).clamp(min=1)
    mean = (values * weights).sum(dim=(1, 2, 3), keepdim=True) / count
    variance = (((values - mean) * weights) ** 2).sum(dim=(1, 2, 3), keepdim=True) / count
    return ((values - mean) / torch.sqrt(variance + eps) * weights).to(layers.dtype)
