"""ELMo as a layer of a task model, the way the paper uses it: character ids in, K scalar mixes out.

The biLM is frozen by default (no gradients, kept in eval mode even when the task model trains), and
each of the K mixes has its own ``s`` and ``gamma`` (e.g. one mix for the encoder input, one for its
output, as the paper does for some tasks).
"""

from collections.abc import Sequence
from typing import NamedTuple, cast

import torch
from torch import nn

from elmo.bilm import BiLM
from elmo.embedder import check_flags
from elmo.model_dir import ModelDir
from elmo.modules.scalar_mix import ScalarMix


class ElmoMixes(NamedTuple):
    """``mixes``: K tensors ``(batch, time, 2P)``; ``mask``: ``(batch, time)`` bool (``time`` counts ``<S>``
    and ``</S>`` when the module keeps them)."""

    mixes: list[torch.Tensor]
    mask: torch.Tensor


class Elmo(nn.Module):
    """``forward(char_ids (batch, time, 50)) -> ElmoMixes``.

    - ``n_mixes``: K independent scalar mixes.
    - ``dropout``: applied to each mix.
    - ``layer_norm``: normalize each layer over the batch's real tokens before mixing (AllenNLP's formula; its
      statistics also counted ``<S>`` and ``</S>``, which they do here only with ``keep_boundaries``).
    - ``fine_tune``: let gradients reach the biLM (and let it follow train/eval mode).
    - ``fixed_weights``: layer weights used as given (normalized to sum 1) instead of learned ones.
    - ``mix_l2``: each learned mix's pull towards an even average (``ScalarMix.regularization``: on the softmax
      weights, not bilm-tf's raw ones); add ``regularization()`` to the loss.
    - ``keep_boundaries``: mix and return ``<S>`` and ``</S>`` too, in AllenNLP's layout (``elmo/bilm.py``), so
      that layer norm counts them as AllenNLP's did.
    """

    def __init__(
        self,
        bilm: BiLM,
        n_mixes: int = 1,
        dropout: float = 0.5,
        layer_norm: bool = False,
        fine_tune: bool = False,
        fixed_weights: Sequence[float] | None = None,
        mix_l2: float = 0.0,
        keep_boundaries: bool = False,
    ) -> None:
        super().__init__()
        check_flags({"layer_norm": layer_norm, "fine_tune": fine_tune, "keep_boundaries": keep_boundaries})
        self.bilm = bilm
        self.fine_tune = fine_tune
        self.keep_boundaries = keep_boundaries
        bilm.requires_grad_(fine_tune)
        n_layers = bilm.config.n_output_layers
        scalars = None if fixed_weights is None else _log_weights(fixed_weights, n_layers)
        self.mixes = nn.ModuleList(
            ScalarMix(n_layers, scalars, trainable=fixed_weights is None, layer_norm=layer_norm, l2=mix_l2)
            for _ in range(n_mixes)
        )
        self.dropout = nn.Dropout(dropout)

    @classmethod
    def from_model(cls, model: str, **options) -> "Elmo":
        """From a model directory or the name of a shipped model."""
        return cls(ModelDir.find(model).load_bilm(), **options)

    def train(self, mode: bool = True) -> "Elmo":
        super().train(mode)
        if not self.fine_tune:
            self.bilm.eval()  # a frozen biLM keeps inference behaviour
        return self

    def forward(self, char_ids: torch.Tensor) -> ElmoMixes:
        with torch.set_grad_enabled(self.fine_tune and torch.is_grad_enabled()):
            output, _ = self.bilm(char_ids, keep_boundaries=self.keep_boundaries)
        mixes = [self.dropout(mix(output.layers, output.mask)) for mix in self.mixes]
        return ElmoMixes(mixes, output.mask)

    def regularization(self) -> torch.Tensor:
        """The mixes' L2 terms (``mix_l2``), summed: zero unless the mixes are learned and ``mix_l2 > 0``."""
        return sum((cast(ScalarMix, mix).regularization() for mix in self.mixes), torch.zeros(()))


def _log_weights(weights: Sequence[float], n_layers: int) -> list[float]:
    """Scalars whose softmax is ``weights / sum(weights)``."""
    values = torch.tensor(list(weights), dtype=torch.float64)
    if values.shape != (n_layers,) or not torch.isfinite(values).all() or (values < 0).any() or values.sum() <= 0:
        raise ValueError(f"fixed_weights must be {n_layers} finite non-negative numbers, not all zero; got "
                         f"{list(weights)}")
    return torch.log(values / values.sum()).tolist()
