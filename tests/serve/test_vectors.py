"""Layer mixes, occurrences and grouping, checked against direct computations."""

import httpx
import numpy as np
import pytest

from elmo.layer_choice import layer_weights
from elmo.similarity import average_linkage_groups, cosine_matrices, find_occurrences

SENTENCES = ["the bank of the river", ["She", "sat", "down"]]


def _served(server, layers) -> list[np.ndarray]:
    response = httpx.post(f"{server.url}/v1/embed", json={"model": "en", "sentences": SENTENCES, "layers": layers},
                          timeout=30)
    assert response.status_code == 200, response.text
    return [np.array(item["vectors"], np.float64) for item in response.json()["embeddings"]]


@pytest.mark.parametrize(("layers", "weights"), [("top", [0, 0, 1]), ("average", [1 / 3] * 3),
                                                 ([0.5, 0.25, 0.25], None), ([2.0, -1.0, 0.5], None)])
def test_a_served_mix_is_the_weighted_sum_of_the_served_layers(server, layers, weights) -> None:
    weights = layers if weights is None else weights
    for all_layers, mixed in zip(_served(server, "all"), _served(server, layers), strict=True):
        assert all_layers.shape == (3, *mixed.shape)
        expected = weights[0] * all_layers[0] + weights[1] * all_layers[1] + weights[2] * all_layers[2]
        np.testing.assert_allclose(mixed, expected, rtol=1e-5, atol=1e-6)
        assert np.abs(all_layers[0] - all_layers[2]).max() > 1e-2  # the layers differ, so the weights matter


def _served_vectors(server, sentences: list[str], layers, pooling: str) -> list[np.ndarray]:
    response = httpx.post(f"{server.url}/v1/embed", json={"model": "en", "sentences": sentences, "layers": layers,
                                                         "pooling": pooling}, timeout=30)
    assert response.status_code == 200, response.text
    return [np.array(item["vectors"], np.float32) for item in response.json()["embeddings"]]


def _float64_mean(vectors: np.ndarray) -> np.ndarray:
    """The token mean as ``Embedder.encode`` states it: summed in float64, rounded once to float32."""
    return vectors.astype(np.float64).mean(axis=-2).astype(np.float32)


@pytest.mark.parametrize("layers", ["average", "all"])
def test_a_served_mean_is_the_float64_mean_of_the_served_tokens(server, layers) -> None:
    """As ``Embedder.encode`` pools: a float32 sum over 220 tokens rounds differently (by about 5e-7)."""
    sentences = ["The bank of the river is steep and full of mud " * 20, "She sat", "a b c d e f g h i j"]
    unpooled = _served_vectors(server, sentences, layers, "none")
    for pooled, tokens in zip(_served_vectors(server, sentences, layers, "mean"), unpooled, strict=True):
        np.testing.assert_array_equal(pooled, _float64_mean(tokens))


def test_weights_whose_mix_fits_float32_are_pooled_without_overflow(server) -> None:
    """A mix near float32's largest value is served unpooled; its mean must be served too, not refused as an
    overflow of a float32 sum over the tokens."""
    sentence = "a a a a a a a a"
    layer_sum = np.abs(_served_vectors(server, [sentence], "all", "none")[0].astype(np.float64).sum(axis=0)).max()
    weights = [float(2.5e38 / layer_sum)] * 3
    unpooled = _served_vectors(server, [sentence], weights, "none")[0]
    pooled = _served_vectors(server, [sentence], weights, "mean")[0]
    assert np.isfinite(pooled).all() and np.abs(pooled).max() > 1e37
    np.testing.assert_array_equal(pooled, _float64_mean(unpooled))


def test_wrong_layer_choices_say_why() -> None:
    with pytest.raises(ValueError, match="2 mixing weights; the model has 3"):
        layer_weights([0.5, 0.5], 3)
    with pytest.raises(ValueError, match="'bottom'"):
        layer_weights("bottom", 3)


def test_occurrences_ignore_case_unless_asked() -> None:
    token_lists = [["Bank", "bank"], ["no"], ["BANK"]]
    assert find_occurrences(token_lists, "bank", match_case=False) == [(0, 0), (0, 1), (2, 0)]
    assert find_occurrences(token_lists, "bank", match_case=True) == [(0, 1)]


def test_average_linkage_recovers_planted_blocks() -> None:
    rng = np.random.default_rng(0)
    members = [0, 2, 1, 0, 2, 1, 1]  # occurrence -> planted group
    noise = rng.uniform(-0.05, 0.05, (7, 7))
    similarity = np.where(np.equal.outer(members, members), 0.9, 0.1) + (noise + noise.T) / 2
    expected = sorted(sorted(i for i, m in enumerate(members) if m == g) for g in range(3))
    assert average_linkage_groups(similarity, 3) == expected
    assert average_linkage_groups(similarity, 1) == [list(range(7))]
    assert average_linkage_groups(similarity, 7) == [[i] for i in range(7)]


def test_equal_vectors_whose_cosine_rounds_above_one_are_grouped() -> None:
    """Layer 0 gives every use of a spelling one vector; their float cosine may be 1 + 2e-16, and a distance
    below zero made scipy refuse (a 500 on /v1/similarity)."""
    over_one = 1.0000000000000002
    similarity = np.array([[over_one, over_one, 0.2], [over_one, over_one, 0.2], [0.2, 0.2, over_one]])
    assert average_linkage_groups(similarity, 2) == [[0, 1], [2]]


def test_average_linkage_merges_the_closest_groups_first() -> None:
    # 0-1 are closest (0.9); then {0,1} and 2 average (0.6 + 0.4) / 2 = 0.5 > 2-3's 0.45 and {0,1}-3's 0.05
    similarity = np.array([[1.0, 0.9, 0.6, 0.0], [0.9, 1.0, 0.4, 0.1], [0.6, 0.4, 1.0, 0.45], [0.0, 0.1, 0.45, 1.0]])
    assert average_linkage_groups(similarity, 3) == [[0, 1], [2], [3]]
    assert average_linkage_groups(similarity, 2) == [[0, 1, 2], [3]]


def test_cosine_matrices_divide_by_the_true_norm_and_leave_zero_rows_at_zero():
    rng = np.random.default_rng(2)
    vectors = rng.normal(size=(2, 3, 5))
    vectors[1, 2] = 0.0
    unit = vectors / np.where(np.linalg.norm(vectors, axis=-1, keepdims=True) > 0,
                              np.linalg.norm(vectors, axis=-1, keepdims=True), 1.0)
    expected = np.einsum("lid,ljd->lij", unit, unit)
    np.testing.assert_allclose(cosine_matrices(vectors * 1e-14), expected, atol=1e-12)  # a floor of 1e-12 gave ~1e-4
    assert (cosine_matrices(vectors)[1, 2] == 0).all()
