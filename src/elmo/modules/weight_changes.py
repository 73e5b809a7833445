"""Telling that weights have changed since something was computed from them, so that what is kept (oneDNN's
reordered weights, the embedder's cached token vectors) is computed again.

A weight changes by being replaced (another tensor, so another ``data_ptr``: the key holds the tensors it was taken
of, so their memory cannot be freed and handed to a replacement while the key stands), by an in-place update
(counted in ``Tensor._version``, a private PyTorch API), or by an optimizer's step: the fused Adam and Adagrad
(torch 2.13 on CPU) update their parameters without counting it in ``_version``, so every ``torch.optim`` step
of the process is counted here by a hook (``elmo train`` validated on stale weights before this). A write through
``.data`` is counted nowhere: whoever changes weights that way must make a new embedder. Inference tensors
(parameters made under ``torch.inference_mode``) count nothing, so nothing computed from them is kept.
"""

from collections.abc import Iterable

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

# Without it an in-place update could go unseen: then nothing computed from weights may be kept.
HAS_VERSION_COUNTER = hasattr(torch.Tensor, "_version")


class _OptimizerSteps:
    """How many steps any ``torch.optim`` optimizer of this process has taken."""

    count = 0

    @classmethod
    def after_step(cls, optimizer: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        cls.count += 1


register_optimizer_step_post_hook(_OptimizerSteps.after_step)


class WeightsKey:
    """Equal to another key when both were taken of the same tensors, unchanged: the optimizer steps, and each
    tensor's address and in-place update count."""

    def __init__(self, parameters: list[torch.Tensor]) -> None:
        self.value = _OptimizerSteps.count, tuple((parameter.data_ptr(), parameter._version)
                                                  for parameter in parameters)
        # Views of the tensors, kept alive until the key is replaced: a replacement cannot be given a freed
        # tensor's address and count (which ``load_state_dict(assign=True)`` or ``.half().float()`` could be)
        self._held = tuple(parameter.detach() for parameter in parameters)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WeightsKey) and self.value == other.value

    __hash__ = None  # type: ignore[assignment]  # compared, never a dict key


def weights_key(parameters: Iterable[torch.Tensor]) -> WeightsKey | None:
    """A key that differs whenever one of ``parameters`` may have changed since an equal key was taken; None
    where a change could go unseen (no ``_version``, or an inference tensor, which has none)."""
    parameters = list(parameters)
    if not HAS_VERSION_COUNTER or any(parameter.is_inference() for parameter in parameters):
        return None
    return WeightsKey(parameters)
