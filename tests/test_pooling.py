"""Pooling against sums written out by hand."""

import numpy as np
import pytest

from elmo.pooling import pool


def test_each_pooling_matches_a_hand_computation_on_every_layer() -> None:
    vectors = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4) ** 1.5  # (layers, tokens, dim)
    for layer in range(2):
        rows = [vectors[layer, t] for t in range(3)]
        np.testing.assert_allclose(pool(vectors, "mean")[layer], (rows[0] + rows[1] + rows[2]) / 3, rtol=1e-6)
        np.testing.assert_array_equal(pool(vectors, "max")[layer], np.maximum(np.maximum(rows[0], rows[1]), rows[2]))
        np.testing.assert_array_equal(pool(vectors, "first")[layer], rows[0])
        np.testing.assert_array_equal(pool(vectors, "last")[layer], rows[2])


def test_an_empty_sentence_pools_to_zeros_and_max_takes_negative_values() -> None:
    assert not pool(np.zeros((0, 5), dtype=np.float32), "mean").any()
    assert pool(np.zeros((3, 0, 5), dtype=np.float32), "max").shape == (3, 5)
    negative = -np.ones((2, 3), dtype=np.float32)
    np.testing.assert_array_equal(pool(negative, "max"), [-1, -1, -1])


def test_an_unknown_pooling_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"'median'.*mean, max, first, last"):
        pool(np.zeros((1, 2)), "median")  # type: ignore[arg-type]


def test_none_is_no_way_to_pool() -> None:
    # check_pooling lets None through ("no pooling", the callers' case); pool itself would have taken the last token
    with pytest.raises(ValueError, match=r"pooling is None; expected one of mean, max, first, last"):
        pool(np.arange(6, dtype=np.float32).reshape(3, 2), None)  # type: ignore[arg-type]
