"""The best answer span from start and end pointer scores: the (start, end) with end >= start, at most
``max_length`` tokens long and inside the passage, that maximizes ``start_scores[start] + end_scores[end]``
(log-probabilities, so the product of the two probabilities)."""

import torch


def best_spans(start_scores: torch.Tensor, end_scores: torch.Tensor, mask: torch.Tensor,
               max_length: int) -> list[tuple[int, int]]:
    """``start_scores``, ``end_scores`` ``(B, T)``, ``mask`` ``(B, T)`` bool (real passage tokens) ->
    one inclusive ``(start, end)`` per row. Ties go to the earliest start, then the earliest end.

    One width at a time (``end - start`` from 0 to ``max_length - 1``), keeping each row's best so far: memory
    ``(B, T)``, where scoring every ``(start, end)`` pair at once took ``(B, T, T)`` for the few widths allowed."""
    if max_length < 1:
        raise ValueError(f"max_length is {max_length}; a span has at least one token")
    if not bool(mask.any(dim=1).all()):
        raise ValueError("every passage needs at least one token")
    time = start_scores.shape[1]

    def best_of_width(width: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Each row's best score over its spans with ``end - start == width``, and the earliest start giving it."""
        allowed = mask[:, :time - width] & mask[:, width:]
        scores = (start_scores[:, :time - width] + end_scores[:, width:]).masked_fill(~allowed, float("-inf"))
        start = scores.argmax(dim=1)  # the first maximum
        return scores.gather(1, start[:, None]).squeeze(1), start

    best_score, best_start = best_of_width(0)
    best_end = best_start.clone()
    for width in range(1, min(max_length, time)):
        score, start = best_of_width(width)
        # A tie with the best of a shorter width goes to the earlier start; at the same start, the shorter stays.
        better = (score > best_score) | ((score == best_score) & (start < best_start))
        best_score = torch.where(better, score, best_score)
        best_start = torch.where(better, start, best_start)
        best_end = torch.where(better, start + width, best_end)
    return list(zip(best_start.tolist(), best_end.tolist(), strict=True))
