"""Tokens/s of the exported biLM in onnxruntime against the PyTorch Embedder, on the same sentences.

Usage: python benchmarks/onnx_speed.py [--preset small] [--sentences 1000] [--batch-size 32] [--threads 1]

One process: random weights for the preset (elmo.config.PRESETS), exported with elmo.onnx_export; random
words (a 50,000-word vocabulary of random letter strings, drawn by a Zipf(1.0) law, so words repeat as in
text), sentence lengths log-normal with mean about 22. onnxruntime gets as many intra-op threads as torch.

Paths, all on every sentence, all layers:
- onnxruntime: the exported graph; sentences sorted by length within windows of 16 batches, as the Embedder
  does, so both run about the same padding (the graph runs every padded step, the Embedder none);
- Embedder: the default PyTorch path (length buckets, packed LSTM, token-vector cache);
- Embedder, no cache: the same without the token-vector cache (the graph has none).
Each path embeds two batches of other sentences first (warm-up; the measured ones' tokens must not be in a
token cache yet). The ratio is onnxruntime's tokens/s over each path's; max diff
is the largest absolute difference of any output from the Embedder's.
"""

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from elmo import BiLM, BiLMConfig, batch_to_char_ids
from elmo.embedder import Embedder
from elmo.onnx_export import OnnxBiLM, export_onnx

BUCKET_BATCHES = 16


def random_sentences(n: int, mean_length: float = 22.0, seed: int = 0) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    alphabet = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary = ["".join(rng.choice(alphabet, size=rng.integers(2, 11))) for _ in range(50_000)]
    weights = 1.0 / np.arange(1, len(vocabulary) + 1)
    weights /= weights.sum()
    sigma = 0.5
    mu = np.log(mean_length) - sigma**2 / 2  # the mean of a log-normal is exp(mu + sigma^2 / 2)
    lengths = np.clip(rng.lognormal(mu, sigma, size=n).round().astype(int), 1, 150)
    return [[vocabulary[i] for i in rng.choice(len(vocabulary), size=k, p=weights)] for k in lengths]


def random_bilm(preset: str) -> BiLM:
    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig.preset(preset))
    with torch.no_grad():
        for parameter in bilm.parameters():
            parameter.normal_(0.0, 0.05)
    return bilm.eval()


def embed_onnx(model: OnnxBiLM, sentences: list[list[str]], batch_size: int) -> list[np.ndarray]:
    """All layers of each sentence, ``(n_layers + 1, T, 2P)``, in input order; length-bucketed batches."""
    results: list[np.ndarray | None] = [None] * len(sentences)
    window = batch_size * BUCKET_BATCHES
    for window_start in range(0, len(sentences), window):
        indices = sorted(range(window_start, min(window_start + window, len(sentences))),
                         key=lambda i: len(sentences[i]), reverse=True)
        for start in range(0, len(indices), batch_size):
            batch = indices[start : start + batch_size]
            layers, _ = model(batch_to_char_ids([sentences[i] for i in batch]))
            for row, i in enumerate(batch):
                results[i] = layers[:, row, : len(sentences[i])]
    return results


def timed(embed, sentences: list[list[str]], batch_size: int) -> tuple[list[np.ndarray], float]:
    embed(random_sentences(2 * batch_size, seed=1))  # other sentences: the measured ones' tokens stay uncached
    start = time.perf_counter()
    vectors = embed(sentences)
    return vectors, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="small")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None, help="torch and onnxruntime threads (default: torch's)")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()

    bilm = random_bilm(args.preset)
    sentences = random_sentences(args.sentences)
    n_tokens = sum(len(s) for s in sentences)
    with tempfile.TemporaryDirectory() as directory:
        start = time.perf_counter()
        path = export_onnx(bilm, Path(directory) / f"{args.preset}.onnx").path
        export_seconds = time.perf_counter() - start
        onnx_model = OnnxBiLM(path, threads=threads)

    mean_length = n_tokens / len(sentences)
    print(f"{args.preset}: {len(sentences)} sentences, {n_tokens} tokens (mean length {mean_length:.1f}), "
          f"batch {args.batch_size}, {threads} thread(s); export took {export_seconds:.1f} s")
    paths = {
        "Embedder": Embedder(bilm),
        "Embedder, no cache": Embedder(bilm, token_cache_size=0),
    }
    results = {name: timed(lambda s, e=e: e.embed(s, batch_size=args.batch_size), sentences, args.batch_size)
               for name, e in paths.items()}
    results["onnxruntime"] = timed(lambda s: embed_onnx(onnx_model, s, args.batch_size), sentences, args.batch_size)

    reference = results["Embedder"][0]
    onnx_rate = n_tokens / results["onnxruntime"][1]
    print(f"{'path':>20} {'tokens/s':>9} {'onnx / path':>11} {'max diff':>9}")
    for name, (vectors, seconds) in results.items():
        difference = max(float(np.abs(a - b).max(initial=0.0)) for a, b in zip(vectors, reference, strict=True))
        rate = n_tokens / seconds
        print(f"{name:>20} {rate:9.0f} {onnx_rate / rate:11.2f} {difference:9.1e}")


if __name__ == "__main__":
    main()
