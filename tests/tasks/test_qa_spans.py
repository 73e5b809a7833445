import itertools
import subprocess
import sys

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


def all_pairs(start_scores: torch.Tensor, end_scores: torch.Tensor, mask: torch.Tensor,
              max_length: int) -> list[tuple[int, int]]:
    """The former best_spans: every (start, end) pair scored at once in a (B, T, T) tensor."""
    time = start_scores.shape[1]
    offsets = torch.arange(time)
    width = offsets[None, :] - offsets[:, None]
    allowed = (width >= 0) & (width < max_length)
    allowed = allowed[None] & mask[:, :, None] & mask[:, None, :]
    pair_scores = (start_scores[:, :, None] + end_scores[:, None, :]).masked_fill(~allowed, float("-inf"))
    best = pair_scores.flatten(1).argmax(dim=1)
    return [(int(index) // time, int(index) % time) for index in best]


@pytest.mark.parametrize("max_length", [1, 2, 3, 7, 40])
def test_best_spans_equal_all_pairs_and_brute_force_with_ties_and_gaps_in_the_mask(max_length):
    """Scores drawn from a few integers tie often, so the tie-breaking (earliest start, then earliest end) is
    checked too; the mask has gaps, so a span's two ends must each be a real token."""
    generator = torch.Generator().manual_seed(100 + max_length)
    for _ in range(30):
        batch, time = 5, 9
        start = torch.randint(-2, 3, (batch, time), generator=generator).float()
        end = torch.randint(-2, 3, (batch, time), generator=generator).float()
        mask = torch.rand(batch, time, generator=generator) < 0.7
        mask[:, 4] = True  # every row has a token
        spans = best_spans(start, end, mask, max_length)
        assert spans == all_pairs(start, end, mask, max_length)
        for row in range(batch):
            pairs = [(i, j) for i, j in itertools.product(range(time), repeat=2)
                     if 0 <= j - i < max_length and mask[row, i] and mask[row, j]]
            wanted = max(pairs, key=lambda pair: (float(start[row, pair[0]] + end[row, pair[1]]), -pair[0], -pair[1]))
            assert spans[row] == wanted


def test_best_spans_memory_grows_with_time_times_max_length_not_time_squared():
    """8 passages of 2,000 tokens: (B, T, T) float scores alone are 128 MB; the spans need kilobytes."""
    measure = """
import resource, torch
from elmo.tasks.qa_spans import best_spans
torch.set_num_threads(1)
best_spans(torch.zeros(1, 4), torch.zeros(1, 4), torch.ones(1, 4, dtype=torch.bool), 3)
start, end = torch.randn(2, 8, 2000).unbind(0)
mask = torch.ones(8, 2000, dtype=torch.bool)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
best_spans(start, end, mask, 30)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""
    grown_kib = int(subprocess.run([sys.executable, "-c", measure], capture_output=True, text=True,
                                   check=True).stdout)
    assert grown_kib < 16 * 1024


def test_best_spans_never_picks_an_end_before_its_start_even_when_that_scores_higher():
    start = torch.tensor([[0.0, 0.0, 9.0]])
    end = torch.tensor([[9.0, 0.0, 1.0]])  # the unconstrained argmaxes would give (2, 0)
    assert best_spans(start, end, torch.ones(1, 3, dtype=torch.bool), 3) == [(2, 2)]


def test_best_spans_refuse_an_empty_passage():
    with pytest.raises(ValueError, match="at least one token"):
        best_spans(torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 2, dtype=torch.bool), 3)
