import faiss
import numpy as np
import pytest

from elmo.search import SearchError
from elmo.search import ann as ann_module
from elmo.search.ann import (
    MAX_NPROBE,
    AnnOptions,
    ann_search,
    build_ann,
    default_factory,
    exact_search,
    read_ann,
    unit_rows,
    write_ann,
)


def _clustered(n: int, dim: int, n_clusters: int, seed: int) -> np.ndarray:
    """Unit vectors around random centres: the structure of contextual vectors (uses of a word sense)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_clusters, dim))
    return unit_rows(centres[rng.integers(n_clusters, size=n)] + 0.3 * rng.normal(size=(n, dim)))


def test_exact_search_equals_a_full_sort_across_chunks(monkeypatch):
    monkeypatch.setattr(ann_module, "CHUNK_ROWS", 7)  # many chunks: the running top-k merge is exercised
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(100, 8)).astype(np.float16)
    queries = rng.normal(size=(5, 8)).astype(np.float32)
    scores, ids = exact_search(vectors, queries, k=6)
    full = queries.astype(np.float64) @ vectors.astype(np.float64).T
    np.testing.assert_array_equal(ids, np.argsort(-full, axis=1)[:, :6])
    np.testing.assert_allclose(scores, np.sort(full, axis=1)[:, ::-1][:, :6], rtol=1e-5)

    rows = np.array([3, 10, 11, 50, 51, 52, 99, 98, 0])
    scores, ids = exact_search(vectors, queries, k=20, rows=rows)  # k above the rows: all of them, best first
    assert ids.shape == (5, len(rows))
    for q in range(5):
        np.testing.assert_array_equal(ids[q], rows[np.argsort(-full[q, rows])])


def test_ivf_pq_with_exact_reranking_recalls_the_brute_force_neighbours(tmp_path):
    vectors = _clustered(30_000, 32, 200, seed=1).astype(np.float16)
    queries = _clustered(200, 32, 200, seed=1)  # same centres, new points
    options = AnnOptions()
    factory = default_factory(len(vectors), 32, options)
    assert factory == "IVF128,PQ8x4fsr"
    faiss.omp_set_num_threads(1)
    ann = build_ann(vectors, options)
    assert ann.ntotal == len(vectors)
    faiss.extract_index_ivf(ann).nprobe = options.nprobe
    _, found = ann_search(ann, vectors, queries, 10, options.candidates)
    _, truth = exact_search(vectors, queries, k=10)
    recalled = [len(set(found[q]) & set(truth[q])) / 10 for q in range(len(queries))]
    assert np.mean(recalled) >= 0.9


@pytest.mark.parametrize(("n_vectors", "dim", "expected"), [
    (19_999, 256, "Flat"),
    (1_000_000, 256, "IVF1024,PQ64x4fsr"),
    (20_000, 256, "IVF128,PQ64x4fsr"),  # sqrt(n) = 141 -> 128 lists
    (3_000_000, 1024, "IVF2048,PQ256x4fsr"),  # sqrt(n) = 1732 -> 2048
    (30_000, 36, "IVF128,SQ8"),  # not a multiple of 8: no 4-dimensional pieces for fast scan
])
def test_default_factory_sizes_ivf_pq_to_the_corpus(n_vectors, dim, expected):
    assert default_factory(n_vectors, dim) == expected


def test_default_factory_keeps_39_training_points_per_list():
    assert default_factory(1_000, 64, AnnOptions(exact_below=0)) == "IVF16,PQ16x4fsr"  # sqrt: 32 lists, too many


def test_tied_scores_are_ranked_by_row_alike_in_every_search(monkeypatch):
    monkeypatch.setattr(ann_module, "CHUNK_ROWS", 16)  # ties that straddle chunks
    rng = np.random.default_rng(3)
    distinct = unit_rows(rng.normal(size=(8, 16))).astype(np.float16)
    vectors = distinct[rng.integers(8, size=200)]  # repeated lines: bit-identical vectors, tied scores
    query = unit_rows(rng.normal(size=(1, 16)))
    full = (query @ vectors.astype(np.float32).T)[0]
    by_score_then_row = np.lexsort((np.arange(200), -full))
    flat = build_ann(vectors, AnnOptions(factory="Flat"))
    for k in range(1, 60):
        _, exact_ids = exact_search(vectors, query, k)
        _, ann_ids = ann_search(flat, vectors, query, k, candidates=300)
        np.testing.assert_array_equal(exact_ids[0], by_score_then_row[:k])  # so the top k is a prefix of the top k+1
        np.testing.assert_array_equal(ann_ids[0], by_score_then_row[:k])


def test_ann_search_returns_at_most_the_rows_it_holds_for_any_k():
    vectors = unit_rows(np.random.default_rng(4).normal(size=(20, 8))).astype(np.float16)
    queries = unit_rows(np.random.default_rng(5).normal(size=(3, 8)))
    flat = build_ann(vectors, AnnOptions(factory="Flat"))
    scores, ids = ann_search(flat, vectors, queries, 1000, candidates=300)  # not (3, 1000), padded with -1
    assert scores.shape == ids.shape == (3, 20)
    np.testing.assert_array_equal(ids, exact_search(vectors, queries, 1000)[1])


def test_ann_search_fills_every_row_where_the_lists_it_visits_hold_fewer_than_k():
    vectors = _clustered(2_000, 16, 20, seed=6).astype(np.float16)
    queries = _clustered(4, 16, 20, seed=7)
    ivf = build_ann(vectors, AnnOptions(factory="IVF16,Flat"))
    faiss.extract_index_ivf(ivf).nprobe = 1  # one list of 16: about 125 rows a query
    for k in (500, len(vectors), 10**6):
        scores, ids = ann_search(ivf, vectors, queries, k, candidates=300)
        expected = min(k, len(vectors))
        assert ids.shape == (4, expected) and (ids >= 0).all()
        full = queries @ vectors.astype(np.float32).T
        for q in range(4):
            np.testing.assert_array_equal(ids[q], np.lexsort((np.arange(len(vectors)), -full[q]))[:expected])
            np.testing.assert_allclose(scores[q], full[q, ids[q]], rtol=1e-5)


def test_an_nprobe_above_the_lists_searches_them_all_as_nprobe_equal_to_the_lists(tmp_path):
    """faiss's fast-scan IVF (the default PQ...x4fsr) returned other rows for nprobe = nlist + 1 than for nlist,
    though both visit every list."""
    vectors = _clustered(2_000, 16, 20, seed=10)
    queries = _clustered(20, 16, 20, seed=11)
    faiss.omp_set_num_threads(1)
    write_ann(build_ann(vectors, AnnOptions(factory="IVF4,PQ4x4fsr")), tmp_path / "ann.faiss")
    every_list = read_ann((tmp_path / "ann.faiss").read_bytes(), nprobe=4)
    every_list_scores, every_list_rows = every_list.search(queries, 10)
    for nprobe in (5, 64, MAX_NPROBE):
        beyond = read_ann((tmp_path / "ann.faiss").read_bytes(), nprobe=nprobe)
        assert faiss.extract_index_ivf(beyond).nprobe == 4
        scores, rows = beyond.search(queries, 10)
        np.testing.assert_array_equal(rows, every_list_rows)
        np.testing.assert_array_equal(scores, every_list_scores)


@pytest.mark.parametrize("nprobe", [0, -1, MAX_NPROBE + 1, 10**21, True, 2.0])
def test_an_nprobe_faiss_cannot_take_is_refused_when_the_options_are_made(nprobe):
    with pytest.raises(SearchError, match=f"nprobe is {nprobe!r}; expected") as refused:
        AnnOptions(nprobe=nprobe)
    assert refused.value.field == "nprobe"
    assert AnnOptions(nprobe=MAX_NPROBE).nprobe == MAX_NPROBE


@pytest.mark.parametrize("k", [-1, -5])
def test_a_negative_k_is_refused_naming_k(k):
    vectors = unit_rows(np.random.default_rng(8).normal(size=(20, 8))).astype(np.float16)
    query = unit_rows(np.random.default_rng(9).normal(size=(1, 8)))
    flat = build_ann(vectors, AnnOptions(factory="Flat"))
    for search in (lambda: exact_search(vectors, query, k), lambda: ann_search(flat, vectors, query, k, 300)):
        with pytest.raises(SearchError, match=f"k is {k}; expected") as refused:
            search()
        assert refused.value.field == "k"
    assert exact_search(vectors, query, 0)[1].shape == (1, 0)  # zero rows asked, zero given


@pytest.mark.parametrize(("factory", "reason"), [
    ("IDMap,Flat", "add does not make sense with IndexIDMap, use add_with_ids"),  # faiss's own message
    ("IVF4,Flat", ann_module.UNTRAINED),  # a check that failed: "Error: " before it
])
def test_faiss_reason_leaves_out_faiss_s_function_and_source_line(factory, reason):
    index = faiss.index_factory(8, factory, faiss.METRIC_INNER_PRODUCT)
    with pytest.raises(RuntimeError) as failed:
        index.add(np.ones((2, 8), np.float32))
    assert ".cpp" in str(failed.value)  # the premise: faiss names its source
    assert ann_module.faiss_reason(failed.value) == reason
