"""The best answer span from start and end pointer scores: the (start, end) with end >= start, at most
``max_length`` tokens long and inside the passage, that maximizes ``start_scores[start] + end_scores[end]``
(log-probabilities, so the product of the two probabilities)."""

import torch


def best_spans(start_scores: torch.Tensor, end_scores: torch.Tensor, mask: torch.Tensor,
               max_length: int) -> list[tuple[int, int]]:
    """``start_scores``, ``end_scores`` ``(B, T)``, ``mask`` ``(B, T)`` bool (real passage tokens) ->
    one inclusive ``(start, end)`` per row. Ties go to the earliest start, then the earliest end."""
    if max_length < 1:
        raise ValueError(f"max_length is {max_length}; a span has at least one token")
    if not bool(mask.any(dim=1).all()):
        raise ValueError("every passage needs at least one token")
    time = start_scores.shape[1]
    offsets = torch.arange(time)
    width = offsets[None, :] - offsets[:, None]  # (start, end) -> end - start
    allowed = (width >= 0) & (width < max_length)
    allowed = allowed[None] & mask[:, :, None] & mask[:, None, :]
    pair_scores = (start_scores[:, :, None] + end_scores[:, None, :]).masked_fill(~allowed, float("-inf"))
    best = pair_scores.flatten(1).argmax(dim=1)  # row-major: the first maximum is the earliest start
    return [(int(index) // time, int(index) % time) for index in best]
