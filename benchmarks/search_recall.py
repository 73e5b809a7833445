"""Contextual search at scale: does the ANN index find what brute force finds, and at what cost?

Usage: python benchmarks/search_recall.py [--corpus data/en/train.txt] [--tokens 1000000] [--model en]
       [--work /tmp/search-bench] [--queries 1000] [--factories IVF1024,PQ64x4fsr IVF1024,SQ8 ...]

1. Indexes the first ``--tokens`` tokens of ``--corpus`` (default: ``python -m elmo.datasets prepare en``'s
   train.txt, written into ``--work``) with ``build_index``, as ``elmo index`` does, and times it. The index is
   kept in ``--work`` and reused by a later run.
2. Queries: ``--queries`` tokens drawn from held-out sentences (valid.txt beside the corpus), embedded with the
   same model and layer, so no query is in the index.
3. Truth: exact top-10 by brute force over the index's float16 vectors.
4. For each ANN configuration (faiss factory strings, and hnswlib's HNSW when it is installed): build time,
   memory held in RAM by the index, recall@10 of the re-ranked answer (and of the raw ANN answer) against
   the truth, and single-thread query latency (ANN search + exact re-rank), median and 95th percentile.
5. The cost of float16 storage: exact top-10 on float16 against float32 vectors, on a sub-corpus re-embedded
   in float32.

It prints the figures as markdown tables (docs/search.md holds a run).
"""

import argparse
import itertools
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
from _peak_memory import peak_rss_mib


def subset(corpus: Path, out: Path, n_tokens: int) -> tuple[int, int]:
    """The first lines of ``corpus`` holding at least ``n_tokens`` whitespace tokens -> ``out``."""
    lines, tokens = [], 0
    with corpus.open(encoding="utf-8") as handle:
        for line in handle:
            lines.append(line)
            tokens += len(line.split())
            if tokens >= n_tokens:
                break
    out.write_text("".join(lines), encoding="utf-8")
    return len(lines), tokens


def recall_at(found: np.ndarray, truth: np.ndarray) -> float:
    k = truth.shape[1]
    return float(np.mean([len(set(f[f >= 0]) & set(t)) / k for f, t in zip(found, truth, strict=True)]))


def query_vectors(embedder, sentences: list[str], layer: str, n_queries: int, seed: int) -> np.ndarray:
    from elmo.layer_choice import stored_layer
    from elmo.search.ann import unit_rows

    chosen = stored_layer(layer, embedder.n_layers)
    vectors = []
    for all_layers in embedder.iter_embed([s.split() for s in sentences], "all"):
        vectors.append(all_layers.mean(axis=0) if chosen == "average" else all_layers[chosen])
    vectors = np.concatenate(vectors)
    rows = np.random.default_rng(seed).choice(len(vectors), min(n_queries, len(vectors)), replace=False)
    return unit_rows(vectors[rows])


def time_queries(search, queries: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Each query alone, as a user's would be: (answers, median ms, p95 ms)."""
    answers, times = [], []
    for query in queries:
        start = time.perf_counter()
        answers.append(search(query[None, :]))
        times.append((time.perf_counter() - start) * 1000)
    return np.concatenate(answers), float(np.median(times)), float(np.percentile(times, 95))


def bench_faiss(factory: str, vectors: np.ndarray, queries: np.ndarray, truth: np.ndarray, k: int,
                nprobes: list[int], candidate_counts: list[int]) -> list[dict]:
    import faiss

    from elmo.search.ann import AnnOptions, ann_search, build_ann

    faiss.omp_set_num_threads(2)
    start = time.perf_counter()
    ann = build_ann(vectors, AnnOptions(factory=factory))
    build_s = time.perf_counter() - start
    ram_mib = len(faiss.serialize_index(ann)) / 2**20
    faiss.omp_set_num_threads(1)
    rows = []
    for nprobe, candidates in itertools.product(nprobes if "IVF" in factory else [None], candidate_counts):
        if nprobe is not None:
            faiss.extract_index_ivf(ann).nprobe = nprobe
        found, median, p95 = time_queries(lambda q, c=candidates: ann_search(ann, vectors, q, k, c)[1], queries)
        _, raw = ann.search(queries, k)
        rows.append({"index": factory, "nprobe": f"{nprobe} / {candidates}", "build_s": build_s, "ram_mib": ram_mib,
                     "recall": recall_at(found, truth), "raw_recall": recall_at(raw, truth),
                     "median_ms": median, "p95_ms": p95})
    return rows


def bench_hnswlib(vectors: np.ndarray, queries: np.ndarray, truth: np.ndarray, k: int, ef: list[int]) -> list[dict]:
    import hnswlib

    n, dim = vectors.shape
    index = hnswlib.Index(space="ip", dim=dim)
    start = time.perf_counter()
    index.init_index(max_elements=n, M=16, ef_construction=100, random_seed=0)
    for first in range(0, n, 65_536):
        block = np.asarray(vectors[first : first + 65_536], dtype=np.float32)
        index.add_items(block, np.arange(first, first + len(block)), num_threads=2)
    build_s = time.perf_counter() - start
    ram_mib = (n * (dim * 4 + 16 * 2 * 4 + 16)) / 2**20  # float32 vector + level-0 links (2M) + header, per element
    index.set_num_threads(1)
    rows = []
    for search_ef in ef:
        index.set_ef(max(search_ef, k))
        found, median, p95 = time_queries(lambda q: index.knn_query(q, k)[0].astype(np.int64), queries)
        rows.append({"index": "hnswlib HNSW M=16 (float32 in RAM; not re-ranked, its latency the search alone)",
                     "nprobe": f"ef={search_ef}", "build_s": build_s,
                     "ram_mib": ram_mib, "recall": recall_at(found, truth), "raw_recall": recall_at(found, truth),
                     "median_ms": median, "p95_ms": p95})
    return rows


def float16_cost(embedder, corpus: Path, layer: str, n_tokens: int, n_queries: int, k: int,
                 seed: int) -> tuple[float, int]:
    """Recall@k of exact search on float16 unit vectors against exact search on float32 ones, and the number of
    tokens (of the first ``n_tokens`` or fewer) it ran on."""
    from elmo.layer_choice import stored_layer
    from elmo.search.ann import exact_search, unit_rows

    chosen = stored_layer(layer, embedder.n_layers)
    sentences, tokens = [], 0
    with corpus.open(encoding="utf-8") as handle:
        for line in handle:
            sentences.append(line.split())
            tokens += len(sentences[-1])
            if tokens >= n_tokens:
                break
    parts = [a.mean(axis=0) if chosen == "average" else a[chosen] for a in embedder.iter_embed(sentences, "all")]
    vectors32 = unit_rows(np.concatenate(parts))
    rng = np.random.default_rng(seed)
    queries = vectors32[rng.choice(len(vectors32), n_queries, replace=False)]
    queries = unit_rows(queries + 0.05 * rng.normal(size=queries.shape).astype(np.float32))  # not in the index
    _, truth = exact_search(vectors32, queries, k)
    _, half = exact_search(vectors32.astype(np.float16), queries, k)
    return recall_at(half, truth), tokens


def _index_of(index_dir: Path, text: Path, fingerprint: str) -> bool:
    """Whether ``index_dir`` is a finished index, of this format, of ``text`` by the model of ``fingerprint``: by
    the corpus sha256 its ``meta.json`` records, as its ``sentences.txt`` holds the lines cleaned (soft hyphens
    deleted, accents composed), not as ``text`` has them."""
    from elmo.files import sha256_of
    from elmo.search.layout import FORMAT_VERSION, META

    meta_file = index_dir / META
    if not meta_file.is_file():
        return False
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    return (meta.get("format") == FORMAT_VERSION and meta.get("fingerprint") == fingerprint
            and meta.get("corpus_sha256") == sha256_of(text))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", type=Path, default=None, help="default: prepare the en corpus into --work")
    parser.add_argument("--model", default="en")
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/search-bench"))
    parser.add_argument("--layer", default=None, help="default: the model's top layer")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--candidates", type=int, nargs="+", default=[100, 300, 1000],
                        help="ANN hits re-ranked exactly")
    parser.add_argument("--factories", nargs="*", default=None, help="faiss factory strings (default: ours + SQ8)")
    parser.add_argument("--nprobes", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--hnsw-ef", type=int, nargs="+", default=[32, 64, 128])
    parser.add_argument("--threads", type=int, default=2, help="torch threads for embedding")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch

    from elmo.embedder import Embedder
    from elmo.search import ContextIndex, build_index
    from elmo.search.ann import default_factory, exact_search

    torch.set_num_threads(args.threads)
    args.work.mkdir(parents=True, exist_ok=True)
    corpus = args.corpus
    if corpus is None:
        from elmo.datasets import prepare

        corpus = args.work / "en" / "train.txt"
        if not corpus.is_file():
            prepare("en", corpus.parent)
    heldout = corpus.with_name("valid.txt")
    if not heldout.is_file():
        sys.exit(f"{heldout}: no held-out text beside the corpus for queries")
    embedder = Embedder.load(args.model)
    layer = args.layer if args.layer is not None else str(embedder.n_layers - 1)
    text = args.work / f"corpus-{args.tokens}.txt"
    n_lines, n_tokens = subset(corpus, text, args.tokens)
    index_dir = args.work / f"index-{args.tokens}-layer{layer}"
    build_s = None
    if not _index_of(index_dir, text, embedder.fingerprint):  # another --model or --corpus: built again
        shutil.rmtree(index_dir, ignore_errors=True)
        start = time.perf_counter()
        build_index(text, index_dir, embedder, layers=[layer], model_name=args.model, progress=True)
        build_s = time.perf_counter() - start
    index = ContextIndex.load(index_dir, embedder=embedder)
    vectors = index.vectors()
    print(f"corpus: {n_lines:,} lines, {n_tokens:,} tokens of {corpus}; model {args.model}, layer {layer}, "
          f"dim {index.dim}; float16 vectors {vectors.nbytes / 2**20:,.0f} MiB on disk")
    if build_s is not None:
        print(f"build_index (embedding + checkpoints + default ANN): {build_s:,.1f} s, "
              f"{n_tokens / build_s:,.0f} tokens/s, {args.threads} threads; peak RSS {peak_rss_mib():,.0f} MiB")

    with heldout.open(encoding="utf-8") as handle:
        heldout_lines = [line for line in itertools.islice(handle, 2000) if line.strip()]
    queries = query_vectors(embedder, heldout_lines, layer, args.queries, args.seed)
    start = time.perf_counter()
    _, truth = exact_search(vectors, queries, args.k)
    exact_ms = (time.perf_counter() - start) * 1000 / len(queries)
    print(f"{len(queries)} held-out queries; brute force: {exact_ms:.1f} ms a query in a batch of {len(queries)} "
          "(NumPy's BLAS, its own thread count)")
    ours = default_factory(len(vectors), index.dim)
    factories = args.factories or ([ours] if ours == "Flat" else [ours, ours.split(",")[0] + ",SQ8"])
    rows = []
    for factory in factories:
        rows += bench_faiss(factory, vectors, queries, truth, args.k, args.nprobes, args.candidates)
        print(f"  {factory} done; peak RSS {peak_rss_mib():,.0f} MiB", file=sys.stderr)
    try:
        rows += bench_hnswlib(vectors, queries, truth, args.k, args.hnsw_ef)
    except ImportError:
        print("hnswlib not installed: its row is skipped", file=sys.stderr)
    print(f"\n| index | nprobe / re-ranked (or ef) | build s | RAM MiB | recall@{args.k} re-ranked | "
          f"recall@{args.k} raw | median ms | p95 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['index']} | {row['nprobe']} | {row['build_s']:.1f} | {row['ram_mib']:.0f} | "
              f"{row['recall']:.3f} | {row['raw_recall']:.3f} | {row['median_ms']:.2f} | {row['p95_ms']:.2f} |")
    cost, cost_tokens = float16_cost(embedder, text, layer, 50_000, 200, args.k, args.seed)
    print(f"\nfloat16 storage: exact recall@{args.k} against float32 on {cost_tokens:,} tokens: {cost:.3f}")
    print(f"peak RSS of this run: {peak_rss_mib():,.0f} MiB")


if __name__ == "__main__":
    main()
