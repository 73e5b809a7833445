"""The approximate-nearest-neighbour side of an index: faiss over a layer's unit vectors, and exact inner
products that re-rank what it proposes (or scan every row). docs/search.md says why faiss and what recall the
default IVF-PQ costs."""

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from elmo.search.errors import SearchError

if TYPE_CHECKING:
    import faiss

CHUNK_ROWS = 65_536  # rows of a memory-mapped file read into RAM (as float32) at a time
# The largest nprobe taken: a C int's, far above any index's number of lists (read_ann searches all of its lists
# where nprobe is more); a larger one overflowed faiss's setter at the first query, after the whole build.
MAX_NPROBE = 2**31 - 1
# What faiss puts before the reason in its errors: the C++ function and source line that threw, and "Error: " where a
# check (not a message of its own) failed.
_FAISS_LOCATION = re.compile(r"^Error in .*? at \S+:\d+: (?:Error: )?", re.DOTALL)
# The reason faiss gives for adding vectors to an index not trained yet.
UNTRAINED = "'is_trained' failed"


@dataclass(frozen=True)
class AnnOptions:
    """How the ANN index is made and searched.

    ``factory``: a faiss index_factory string; ``None`` sizes IVF-PQ to the corpus (``default_factory``).
    ``nprobe``: inverted lists visited per query, 1 to ``MAX_NPROBE`` (``read_ann`` visits them all where it is
    more than the index has). ``candidates``: hits per query re-ranked by exact cosine (at least ``k``).
    ``train_size``: vectors sampled to train the quantizers. ``exact_below``: a corpus with fewer tokens gets a
    flat (exact) index, as IVF-PQ cannot be trained on so few.

    SearchError (field ``nprobe``) for an ``nprobe`` out of range, when made: faiss would refuse it only at the
    first query, after the whole corpus is embedded and indexed.
    """

    factory: str | None = None
    nprobe: int = 32
    candidates: int = 300
    train_size: int = 100_000
    exact_below: int = 20_000

    def __post_init__(self) -> None:
        if isinstance(self.nprobe, bool) or not isinstance(self.nprobe, int) or not 1 <= self.nprobe <= MAX_NPROBE:
            raise SearchError(f"nprobe is {self.nprobe!r}; expected the number of inverted lists searched per query, "
                              f"a whole number from 1 to {MAX_NPROBE}", "nprobe")


def default_factory(n_vectors: int, dim: int, options: AnnOptions = AnnOptions()) -> str:
    """``Flat`` below ``options.exact_below``; else IVF with about ``sqrt(n)`` lists (a power of two, at most
    ``n / 39``, faiss's minimum of training points per centroid) and residuals coded by 4-bit fast-scan PQ over
    4-dimensional pieces (``dim / 8`` bytes a vector), or by 8-bit scalar quantization when ``dim`` is not a
    multiple of 8. docs/search.md has the measurements behind this choice."""
    if n_vectors < options.exact_below:
        return "Flat"
    nlist = 2 ** round(math.log2(math.sqrt(n_vectors)))
    while nlist > 1 and nlist * 39 > n_vectors:
        nlist //= 2
    return f"IVF{nlist},PQ{dim // 4}x4fsr" if dim % 8 == 0 else f"IVF{nlist},SQ8"


def build_ann(vectors: np.ndarray, options: AnnOptions = AnnOptions(), seed: int = 0) -> "faiss.Index":
    """An inner-product faiss index over ``vectors`` (``(n, dim)``, any float dtype, e.g. a float16 memmap),
    trained on a random sample and filled a chunk at a time, so only the codes are ever held in RAM."""
    import faiss

    n_vectors, dim = vectors.shape
    factory = options.factory or default_factory(n_vectors, dim, options)
    index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    if not index.is_trained:
        train_size = max(options.train_size, 40 * n_lists(index))
        rows = np.sort(np.random.default_rng(seed).choice(n_vectors, min(n_vectors, train_size), replace=False))
        index.train(np.ascontiguousarray(vectors[rows], dtype=np.float32))
    for start in range(0, n_vectors, CHUNK_ROWS):
        index.add(np.ascontiguousarray(vectors[start : start + CHUNK_ROWS], dtype=np.float32))
    return index


def n_lists(index: "faiss.Index") -> int:
    import faiss

    try:
        return faiss.extract_index_ivf(index).nlist
    except RuntimeError:  # not an IVF index
        return 1


def faiss_reason(error: RuntimeError) -> str:
    """The reason in one of faiss's errors, without the C++ function and source line that threw it, which tell a
    user nothing about their --factory or corpus."""
    return _FAISS_LOCATION.sub("", str(error).strip()) or "faiss gave no reason"


def check_k(k: int) -> None:
    """Refuse a negative ``k`` (SearchError, field ``k``): slicing by it would drop rows from the end instead."""
    if k < 0:
        raise SearchError(f"k is {k}; expected the number of rows to return, 0 or more", "k")


def exact_search(
    vectors: np.ndarray, queries: np.ndarray, k: int, rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Brute force: the ``k`` rows of highest inner product with each query, best first.

    ``vectors``: ``(n, dim)`` (a memmap is scanned a chunk at a time); ``queries``: ``(Q, dim)``; ``rows``: search
    only these rows. Returns scores ``(Q, k')`` float32 and row ids ``(Q, k')`` int64, ``k' = min(k, candidates)``.
    SearchError for a negative ``k``.
    """
    check_k(k)
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    candidates = np.arange(len(vectors)) if rows is None else np.asarray(rows, dtype=np.int64)
    k = min(k, len(candidates))
    best = [(np.zeros(0, np.float32), np.zeros(0, np.int64))] * len(queries)
    for start in range(0, len(candidates), CHUNK_ROWS):
        chunk_ids = candidates[start : start + CHUNK_ROWS]
        block = vectors[chunk_ids] if rows is not None else vectors[start : start + len(chunk_ids)]
        scores = queries @ np.asarray(block, dtype=np.float32).T
        best = [top_rows(np.concatenate([kept_scores, row_scores]), np.concatenate([kept_ids, chunk_ids]), k)
                for (kept_scores, kept_ids), row_scores in zip(best, scores, strict=True)]
    if not best:
        return np.zeros((0, k), np.float32), np.zeros((0, k), np.int64)
    return np.stack([scores for scores, _ in best]), np.stack([ids for _, ids in best])


def top_rows(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of one query's ``scores``, highest first and, among equal scores, the lowest row id first
    (repeated corpus lines give equal vectors), so every search ranks ties alike and the top ``k`` is a prefix
    of the top ``k + 1``."""
    if len(scores) > k:
        kth_best = -np.partition(-scores, k - 1)[k - 1]
        keep = scores >= kth_best  # every row tied with the k-th, so the lowest ids among them can be chosen
        scores, ids = scores[keep], ids[keep]
    order = np.lexsort((ids, -scores))[:k]
    return scores[order], ids[order]


def ann_search(ann: "faiss.Index", vectors: np.ndarray, queries: np.ndarray, k: int,
               candidates: int) -> tuple[np.ndarray, np.ndarray]:
    """``exact_search``'s answer, approximately: the ANN index proposes ``max(k, candidates)`` rows a query and
    exact inner products on ``vectors`` rank them. Scores and rows are ``(Q, k')``, ``k' = min(k, n)`` as in
    ``exact_search`` (a ``k`` beyond the index allocates nothing for it). A query the ANN index proposes fewer
    than ``k'`` rows for (an IVF index visits only ``nprobe`` lists) is answered by ``exact_search``, so every
    row is filled. SearchError for a negative ``k``."""
    check_k(k)
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    k = min(k, len(vectors))
    _, proposed = ann.search(queries, min(max(k, candidates), len(vectors)))
    scores = np.full((len(queries), k), -np.inf, np.float32)
    best = np.full((len(queries), k), -1, np.int64)
    for q, found in enumerate(proposed):
        found = np.unique(found[found >= 0])  # sorted, so a memmap is read in order
        exact_scores, top = top_rows(np.asarray(vectors[found], dtype=np.float32) @ queries[q], found, k)
        scores[q, : len(top)], best[q, : len(top)] = exact_scores, top
    short = (best < 0).any(axis=1)
    if short.any():
        scores[short], best[short] = exact_search(vectors, queries[short], k)
    return scores, best


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 in float32 (zero rows stay zero), so inner product is cosine."""
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


def write_ann(index: "faiss.Index", path: Path) -> None:
    import faiss

    faiss.write_index(index, str(path))


def read_ann(written: bytes, nprobe: int) -> "faiss.Index":
    """An index ``write_ann`` wrote, from its file's bytes (the reader holds the file open: ``index.py``), searching
    ``nprobe`` inverted lists a query if it has lists, or all of them where it has fewer: faiss's fast-scan IVF
    indexes (the default ``PQ...x4fsr``) return wrong rows for an ``nprobe`` above their number of lists (faiss
    1.15: other rows at ``nlist + 1``, the memory exhausted at ``2**31 - 1``)."""
    import faiss

    index = faiss.deserialize_index(np.frombuffer(written, dtype=np.uint8))
    lists = n_lists(index)
    if lists > 1:
        faiss.extract_index_ivf(index).nprobe = min(nprobe, lists)
    return index
