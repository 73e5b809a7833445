"""One word across sentences: where it occurs, how alike its vectors are layer by layer, and which
occurrences group together. Shared by the demo and the HTTP service."""

from collections.abc import Sequence

import numpy as np


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
