"""A state passed to ``BiLM.forward`` / ``contextualize`` is refused unless it is (2 directions, n_layers, batch,
projection_dim) for h and (..., dim) for c: indexing a wrong one dropped a layer or picked rows silently."""

import pytest
import torch

from elmo import BiLM, BiLMState
from elmo.characters import batch_to_char_ids

BATCH = [["a", "b", "c"], ["d"]]


def _expected_shapes(bilm: BiLM) -> tuple[tuple[int, ...], tuple[int, ...]]:
    lstm = bilm.config.lstm
    return (2, lstm.n_layers, len(BATCH), lstm.projection_dim), (2, lstm.n_layers, len(BATCH), lstm.dim)


@pytest.mark.parametrize(("h_change", "c_change"), [
    ((0, 0, 0, 0), (0, 0, 0, 0)),  # the right shapes: accepted
    ((0, 1, 0, 0), (0, 1, 0, 0)),  # a layer too many
    ((0, -1, 0, 0), (0, -1, 0, 0)),  # a layer too few
    ((0, 0, 0, 0), (0, 0, 1, 0)),  # c holds a row more than the batch
    ((-1, 0, 0, 0), (-1, 0, 0, 0)),  # one direction
    ((0, 0, 0, 1), (0, 0, 0, 0)),  # h of another width
])
def test_a_state_of_another_shape_than_the_models_is_refused_naming_both_shapes(fixture_bilm: BiLM, h_change,
                                                                                 c_change):
    expected_h, expected_c = _expected_shapes(fixture_bilm)
    h_shape = tuple(size + change for size, change in zip(expected_h, h_change, strict=True))
    c_shape = tuple(size + change for size, change in zip(expected_c, c_change, strict=True))
    state = BiLMState(torch.zeros(h_shape), torch.zeros(c_shape))
    char_ids = batch_to_char_ids(BATCH)
    if h_shape == expected_h and c_shape == expected_c:
        assert fixture_bilm(char_ids, state=state)[1].h.shape == expected_h
        return
    message = rf"state has h \({', '.join(map(str, h_shape))}\) and c \({', '.join(map(str, c_shape))}\)"
    with pytest.raises(ValueError, match=message):
        fixture_bilm(char_ids, state=state)
