"""StepNoise's state resets: which rows start a step from zero, and that every process agrees."""

import torch

from elmo.bilm import BiLMState
from elmo.training.language_model import StepNoise


def _state(n_rows: int) -> BiLMState:
    generator = torch.Generator().manual_seed(3)
    return BiLMState(torch.rand((2, 2, n_rows, 5), generator=generator) + 0.5,
                     torch.rand((2, 2, n_rows, 9), generator=generator) + 0.5)


def _noise(step: int, rows: range, n_rows: int, state_reset: float) -> StepNoise:
    return StepNoise.draw(seed=7, step=step, dropout=0.0, n_negatives=4, vocab_size=50, rows=rows, n_rows=n_rows,
                          state_reset=state_reset)


def test_reset_zeroes_whole_rows_at_the_given_rate_and_keeps_the_others_bit_for_bit():
    n_rows, rate = 4000, 0.1
    state = _state(n_rows)
    reset = _noise(11, range(n_rows), n_rows, rate).reset_rows(state)
    zero_h = (reset.h == 0).all(dim=3).all(dim=1).all(dim=0)  # a row is reset in every layer and direction
    zero_c = (reset.c == 0).all(dim=3).all(dim=1).all(dim=0)
    assert torch.equal(zero_h, zero_c)
    assert torch.equal(reset.h[:, :, ~zero_h], state.h[:, :, ~zero_h])
    assert torch.equal(reset.c[:, :, ~zero_h], state.c[:, :, ~zero_h])
    # Binomial(4000, 0.1): mean 400, standard deviation 19; 5 deviations either side.
    assert 305 <= int(zero_h.sum()) <= 495
    other_step = _noise(12, range(n_rows), n_rows, rate).reset_rows(state)
    assert not torch.equal(other_step.h, reset.h)


def test_each_process_resets_its_slice_of_the_rows_one_process_would_reset():
    n_rows = 64
    state = _state(n_rows)
    whole = _noise(5, range(n_rows), n_rows, 0.3).reset_rows(state)
    for rows in (range(0, 32), range(32, 64)):
        part = BiLMState(state.h[:, :, rows.start : rows.stop], state.c[:, :, rows.start : rows.stop])
        reset = _noise(5, rows, n_rows, 0.3).reset_rows(part)
        assert torch.equal(reset.h, whole.h[:, :, rows.start : rows.stop])
        assert torch.equal(reset.c, whole.c[:, :, rows.start : rows.stop])


def test_a_zero_rate_returns_the_state_unchanged():
    state = _state(16)
    assert _noise(1, range(16), 16, 0.0).reset_rows(state) is state
