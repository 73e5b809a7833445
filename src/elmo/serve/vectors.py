"""What a request asks for, computed from every layer of its sentences: layer mixes, pooling, and the
per-layer cosine similarity of one word's occurrences with the groups they fall into.

The mixes repeat ``Embedder.embed``'s arithmetic exactly, so a served vector equals the offline one.
"""

from collections.abc import Sequence

import numpy as np

LayerChoice = str | Sequence[float]


def layer_weights(layers: LayerChoice, n_layers: int) -> np.ndarray | None:
    """``None`` keeps every layer; otherwise float32 weights, one per layer. Raises ValueError naming the fault."""
    if isinstance(layers, str):
        if layers == "all":
            return None
        if layers == "top":
            return np.eye(n_layers, dtype=np.float32)[-1]
        if layers == "average":
            return np.full(n_layers, 1.0 / n_layers, dtype=np.float32)
        raise ValueError(f"{layers!r} is not one of 'all', 'top', 'average' or a list of mixing weights")
    weights = np.asarray(layers, dtype=np.float32)
    if weights.shape != (n_layers,):
        raise ValueError(f"got {weights.size} mixing weights; the model has {n_layers} layers")
    return weights


def mix(all_layers: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    """``(n_layers, T, D)`` -> ``(n_layers, T, D)`` when ``weights`` is None, else ``(T, D)``."""
    if weights is None:
        return all_layers
    if weights.sum() == 1.0 and weights.max() == 1.0:  # one layer picked: no arithmetic, as the embedder does
        return all_layers[int(weights.argmax())]
    return np.tensordot(weights, all_layers, axes=1)


def pool(vectors: np.ndarray, pooling: str) -> np.ndarray:
    """``mean`` averages over the token axis (second to last): ``(..., T, D)`` -> ``(..., D)``."""
    return vectors.mean(axis=-2) if pooling == "mean" else vectors


def find_occurrences(token_lists: Sequence[Sequence[str]], word: str, match_case: bool) -> list[tuple[int, int]]:
    """``(sentence, position)`` of every token equal to ``word`` (ignoring case unless ``match_case``)."""
    wanted = word if match_case else word.casefold()
    return [(s, p) for s, tokens in enumerate(token_lists) for p, token in enumerate(tokens)
            if (token if match_case else token.casefold()) == wanted]


def cosine_matrices(vectors: np.ndarray) -> np.ndarray:
    """``(n_layers, N, D)`` -> ``(n_layers, N, N)`` cosine similarity in float64 (zero vectors give 0)."""
    vectors = vectors.astype(np.float64)
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)
    return np.einsum("lid,ljd->lij", unit, unit)


def average_linkage_groups(similarity: np.ndarray, n_groups: int) -> list[list[int]]:
    """Agglomerative clustering with average linkage until ``n_groups`` remain.

    Repeatedly merges the two groups with the highest mean pairwise similarity; deterministic (ties go to
    the lowest indices). Groups are returned sorted, each by its smallest member.
    """
    groups = [[i] for i in range(len(similarity))]
    while len(groups) > max(n_groups, 1):
        best, pair = -np.inf, (0, 1)
        for a in range(len(groups)):
            for b in range(a + 1, len(groups)):
                linkage = similarity[np.ix_(groups[a], groups[b])].mean()
                if linkage > best:
                    best, pair = linkage, (a, b)
        a, b = pair
        groups[a] = sorted(groups[a] + groups[b])
        del groups[b]
    return sorted(groups)
