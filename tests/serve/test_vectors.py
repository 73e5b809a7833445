"""Layer mixes, occurrences and grouping, checked against direct computations."""

import numpy as np
import pytest

from elmo.embedder import Embedder, layer_weights, mix_layers
from elmo.similarity import average_linkage_groups, find_occurrences


@pytest.mark.parametrize("layers", ["all", "top", "average", [0.5, 0.25, 0.25], [0.0, 0.0, 1.0]])
def test_mix_of_all_layers_is_bitwise_the_embedders_choice(embedder: Embedder, layers) -> None:
    tokens = [["the", "bank", "of", "the", "river"]]
    (all_layers,) = embedder.embed(tokens, "all")
    (expected,) = embedder.embed(tokens, layers)
    np.testing.assert_array_equal(mix_layers(all_layers, layer_weights(layers, 3)), expected)


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
