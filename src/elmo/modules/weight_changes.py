"""Telling that weights have changed since something was computed from them, so that what is kept (oneDNN's
reordered weights, the embedder's cached token vectors) is computed again.

A weight changes by being replaced (another tensor, so another ``data_ptr``: the key holds the tensors it was taken
of, so their memory cannot be freed and handed to a replacement while the key stands), by an in-place update
(counted in ``Tensor._version``, a private PyTorch API), or by an optimizer's step: the fused Adam and Adagrad
(torch 2.13 on CPU) update their parameters without counting it in ``_version``, so every ``torch.optim`` step
of the process is counted here by a hook (``elmo train`` validated on stale weights before this). A write through
``.data`` or a NumPy view of a weight is counted nowhere: whoever changes weights that way calls ``weights_changed``
(``elmo.weights_changed``; making an ``Embedder`` calls it too), which makes every key taken before differ.
Inference tensors (parameters made under ``torch.inference_mode``) count nothing, so nothing computed from them is
kept.
"""

from collections.abc import Iterable

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

# Without it an in-place update could go unseen: then nothing computed from weights may be kept.
HAS_VERSION_COUNTER = hasattr(torch.Tensor, "_version")


class _UncountedChanges:
    """How many changes to weights of this process no tensor's ``_version`` counts: the steps any ``torch.optim``
    optimizer has taken, and the calls of ``weights_changed``."""

    count = 0

    @classmethod
    def after_optimizer_step(cls, optimizer: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        cls.count += 1


register_optimizer_step_post_hook(_UncountedChanges.after_optimizer_step)


def weights_changed() -> None:
    """Say that weights of this process changed where nothing counts it (a write through ``.data``, or through a
    NumPy view of a weight): every reordered weight and cached token vector is computed again when next needed."""
    _UncountedChanges.count += 1


class WeightsKey:
    """Equal to another key when both were taken of the same tensors, unchanged: the uncounted changes (optimizer
    steps, ``weights_changed``), and each tensor's address and in-place update count."""

    def __init__(self, parameters: list[torch.Tensor]) -> None:
        self.value = _UncountedChanges.count, tuple((parameter.data_ptr(), parameter._version)
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
