"""One word across sentences: where it occurs, how alike its vectors are layer by layer, and which
occurrences group together. Shared by the demo and the HTTP service."""

from collections.abc import Sequence

import numpy as np

from elmo.tokenizers import word_key


def find_occurrences(token_lists: Sequence[Sequence[str]], word: str, match_case: bool) -> list[tuple[int, int]]:
    """``(sentence, position)`` of every token whose ``word_key`` is the word's (ignoring case unless
    ``match_case``)."""
    wanted = word_key(word, match_case)
    return [(s, p) for s, tokens in enumerate(token_lists) for p, token in enumerate(tokens)
            if word_key(token, match_case) == wanted]


def cosine_matrices(vectors: np.ndarray) -> np.ndarray:
    """``(n_layers, N, D)`` -> ``(n_layers, N, N)`` cosine similarity in float64 (zero vectors give 0)."""
    vectors = vectors.astype(np.float64)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    # divide by the true norm (a floor of 1e-12 shrank the cosines of vectors shorter than that), zero rows stay 0
    unit = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return np.einsum("lid,ljd->lij", unit, unit)


def average_linkage_groups(similarity: np.ndarray, n_groups: int) -> list[list[int]]:
    """Agglomerative clustering with average linkage (scipy's, on the distance ``1 - similarity``), cut where
    ``n_groups`` remain: the two groups of highest mean pairwise similarity are merged first. Groups are
    returned sorted, each by its smallest member."""
    from scipy.cluster.hierarchy import cut_tree, linkage  # the serve extra's; the demo and search need no scipy
    from scipy.spatial.distance import squareform

    n = len(similarity)
    if n < 2:
        return [list(range(n))]
    # symmetric, as the cosines are up to rounding; never below 0: two equal vectors' cosine may round above 1
    # (layer 0 gives every use of a spelling one vector), and scipy refuses a negative distance
    distance = np.maximum(1.0 - (similarity + similarity.T) / 2, 0.0)
    np.fill_diagonal(distance, 0.0)
    tree = linkage(squareform(distance, checks=False), method="average")
    labels = cut_tree(tree, n_clusters=min(max(n_groups, 1), n))[:, 0]
    return sorted(np.flatnonzero(labels == label).tolist() for label in np.unique(labels))
