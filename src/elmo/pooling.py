"""Sentence vectors from token vectors: the one statement of pooling, used by ``Embedder.encode``,
``elmo embed --pooling`` and the distributed embedders.

A sentence's array has its tokens on the second-to-last axis: ``(T, D)`` for one layer or a mix, ``(L, T, D)``
for every layer; pooling removes that axis. A sentence with no tokens pools to zeros (there is nothing to
average, and a NaN would poison whatever consumes the vectors).
"""

from typing import Literal, get_args

import numpy as np

Pooling = Literal["mean", "max", "first", "last"]
POOLINGS: tuple[str, ...] = get_args(Pooling)


def check_pooling(pooling: str | None) -> None:
    """Raise ValueError naming the choices unless ``pooling`` is None or one of ``POOLINGS``."""
    if pooling is not None and pooling not in POOLINGS:
        raise ValueError(f"pooling is {pooling!r}; expected one of {', '.join(POOLINGS)} or None")


def pool(vectors: np.ndarray, pooling: Pooling) -> np.ndarray:
    """``vectors`` ``(..., T, D)`` -> ``(..., D)``: mean, max, first or last over the ``T`` real tokens."""
    if pooling not in POOLINGS:  # None too: "no pooling" is the caller's to handle, not a fifth way to pool
        raise ValueError(f"pooling is {pooling!r}; expected one of {', '.join(POOLINGS)}")
    if vectors.shape[-2] == 0:
        return np.zeros(vectors.shape[:-2] + vectors.shape[-1:], dtype=vectors.dtype)
    if pooling == "mean":
        return vectors.mean(axis=-2, dtype=np.float64).astype(vectors.dtype)
    if pooling == "max":
        return vectors.max(axis=-2)
    return vectors[..., 0 if pooling == "first" else -1, :].copy()
