"""An independent float64 NumPy forward pass, written from the equations, against the PyTorch biLM in float64.

The reference (``float64_reference.py``) also checks the weight mapping of elmo.weights. Every dimension differs
from every other and the clips are small enough to fire. ``test_fast_path_reference.py`` checks float32 against it.
"""

import numpy as np
import pytest
import torch
from float64_reference import CASES, SENTENCES, case_model

from elmo import batch_to_char_ids


@pytest.fixture(params=sorted(CASES))
def models(request, tmp_path):
    bilm, reference = case_model(request.param, tmp_path)
    return bilm.double(), reference


def test_float64_forward_pass_equals_the_reference(models):
    bilm, reference = models
    with torch.no_grad():
        output, _ = bilm(batch_to_char_ids(SENTENCES))
    for row, tokens in enumerate(SENTENCES):
        expected, _ = reference.embed(tokens)
        got = output.layers[:, row, : len(tokens)].numpy()
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-10)
        assert not output.layers[:, row, len(tokens) :].any()
    if bilm.config.lstm.cell_clip:
        assert reference.cell_clips_fired > 0
    if bilm.config.lstm.has_projection and bilm.config.lstm.proj_clip:
        assert reference.proj_clips_fired > 0


def test_carried_state_continues_each_row_as_the_reference_does(models):
    bilm, reference = models
    first, second = SENTENCES[:2], [SENTENCES[4], SENTENCES[2]]
    with torch.no_grad():
        _, state = bilm(batch_to_char_ids(first))
        output, _ = bilm(batch_to_char_ids(second), state)
    for row in range(2):
        _, reference_state = reference.embed(first[row])
        expected, _ = reference.embed(second[row], reference_state)
        got = output.layers[:, row, : len(second[row])].numpy()
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-10)


def test_kept_boundaries_are_the_references_s_and_end_positions_around_each_rows_tokens(models):
    bilm, reference = models
    with torch.no_grad():
        output, _ = bilm(batch_to_char_ids(SENTENCES), keep_boundaries=True)
    longest = max(map(len, SENTENCES))
    assert output.layers.shape[2] == longest + 2
    for row, tokens in enumerate(SENTENCES):
        expected, _ = reference.embed(tokens, keep_boundaries=True)  # <S>, the tokens, </S>
        np.testing.assert_allclose(output.layers[:, row, : len(tokens) + 2].numpy(), expected, rtol=0, atol=1e-10)
        assert output.mask[row].tolist() == [True] * (len(tokens) + 2) + [False] * (longest - len(tokens))
        assert not output.layers[:, row, len(tokens) + 2 :].any()
