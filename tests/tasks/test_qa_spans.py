import itertools

import pytest
import torch

from elmo.tasks.qa_spans import best_spans


def brute_force(start: list[float], end: list[float], length: int, max_length: int) -> tuple[int, int]:
    pairs = [(i, j) for i, j in itertools.product(range(length), repeat=2) if 0 <= j - i < max_length]
    return max(pairs, key=lambda pair: (start[pair[0]] + end[pair[1]], -pair[0], -pair[1]))


@pytest.mark.parametrize("max_length", [1, 2, 5, 40])
def test_best_spans_equal_brute_force_over_random_scores_with_padding_and_cap(max_length):
    generator = torch.Generator().manual_seed(max_length)
    for _ in range(30):
        batch, time = 4, 12
        start = torch.randn(batch, time, generator=generator)
        end = torch.randn(batch, time, generator=generator)
        lengths = torch.randint(1, time + 1, (batch,), generator=generator)
        mask = torch.arange(time)[None, :] < lengths[:, None]
        spans = best_spans(start, end, mask, max_length)
        for row in range(batch):
            length = int(lengths[row])
            wanted = brute_force(start[row].tolist(), end[row].tolist(), length, max_length)
            assert spans[row] == wanted
            assert 0 <= spans[row][1] - spans[row][0] < max_length and spans[row][1] < length


def test_best_spans_never_picks_an_end_before_its_start_even_when_that_scores_higher():
    start = torch.tensor([[0.0, 0.0, 9.0]])
    end = torch.tensor([[9.0, 0.0, 1.0]])  # the unconstrained argmaxes would give (2, 0)
    assert best_spans(start, end, torch.ones(1, 3, dtype=torch.bool), 3) == [(2, 2)]


def test_best_spans_refuse_an_empty_passage():
    with pytest.raises(ValueError, match="at least one token"):
        best_spans(torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 2, dtype=torch.bool), 3)
