"""Training throughput of the biLM on this machine: tokens/s, achieved GFLOP/s, and their share of the fp32
matmul peak measured in the same run.

    python benchmarks/train_throughput.py --config tiny --batch-size 32 --steps 20

The corpus is synthetic (Zipf-distributed words, sentence lengths 5-40), written to a temporary
directory; speed depends on the model and the number of distinct tokens per batch, not on meaning.
FLOPs are counted analytically (multiply-add = 2): char CNN over each batch's distinct tokens, highways,
projection, both LSTM stacks, the sampled softmax, and backward = 2 x forward.
"""

import argparse
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from elmo.config import BiLMConfig
from elmo.training.batches import Batcher, ModelInputs
from elmo.training.corpus import Corpus
from elmo.training.language_model import LanguageModel, StepNoise, initialize_like_bilm_tf
from elmo.training.presets import resolve_config
from elmo.training.vocab import Vocabulary


def write_corpus(path: Path, n_sentences: int, n_words: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(n_words)]
    with path.open("w", encoding="utf-8") as handle:
        for _ in range(n_sentences):
            ranks = np.minimum(rng.zipf(1.2, size=rng.integers(5, 41)), n_words) - 1
            handle.write(" ".join(words[r] for r in ranks) + "\n")


def forward_flops(config: BiLMConfig, inputs: ModelInputs, n_negatives: int, vocab_size: int) -> float:
    cnn, lstm = config.char_cnn, config.lstm
    n_tokens = inputs.forward_tokens.numel()
    n_distinct = inputs.char_ids.shape[0]
    per_distinct = sum(2 * width * cnn.embedding_dim * n * (cnn.max_characters_per_token - width + 1)
                       for width, n in cnn.filters)
    per_distinct += cnn.n_highway * 2 * 2 * cnn.n_filters**2
    if config.has_token_projection:
        per_distinct += 2 * cnn.n_filters * lstm.projection_dim
    per_token = 0
    for _ in range(lstm.n_layers):
        per_token += 2 * 4 * lstm.dim * (2 * lstm.projection_dim)  # input and recurrent products
        if lstm.has_projection:
            per_token += 2 * lstm.dim * lstm.projection_dim
    per_token += 2 * lstm.projection_dim * (min(n_negatives, vocab_size) + 1)  # sampled softmax
    return n_distinct * per_distinct + 2 * n_tokens * per_token  # two directions


def matmul_peak_gflops(size: int = 2048, repeats: int = 5) -> float:
    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="tiny", help="preset name or options.json")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--unroll-steps", type=int, default=20)
    parser.add_argument("--negatives", type=int, default=8192)
    parser.add_argument("--vocab-size", type=int, default=20000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    config = resolve_config(args.config)
    with tempfile.TemporaryDirectory() as directory:
        corpus_path = Path(directory) / "corpus.txt"
        write_corpus(corpus_path, 20000, args.vocab_size, seed=0)
        corpus = Corpus([str(corpus_path)])
        vocab = Vocabulary.from_counts(corpus.count_tokens())
        torch.manual_seed(0)
        model = LanguageModel(config, len(vocab))
        initialize_like_bilm_tf(model)
        optimizer = torch.optim.Adagrad(model.parameters(), lr=0.2, initial_accumulator_value=1.0, eps=0.0)
        rows = range(args.batch_size)
        batcher = Batcher(corpus, vocab, rows, args.batch_size, args.unroll_steps, seed=0, max_epochs=None)
        state = model.bilm.zero_state(args.batch_size)
        flops, seconds = 0.0, 0.0
        for step in range(args.warmup + args.steps):
            start = time.perf_counter()
            inputs = batcher.next_batch()
            noise = StepNoise.draw(0, step, 0.1, args.negatives, len(vocab), rows, args.batch_size)
            output = model(inputs, state, noise)
            (output.loss * args.unroll_steps).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            state = output.state
            if step >= args.warmup:
                seconds += time.perf_counter() - start
                flops += 3 * forward_flops(config, inputs, args.negatives, len(vocab))
        batcher.close()

    peak = matmul_peak_gflops()
    tokens = args.steps * args.batch_size * args.unroll_steps
    achieved = flops / seconds / 1e9
    print(f"config {args.config}, batch {args.batch_size} x {args.unroll_steps}, {args.negatives} negatives, "
          f"vocab {len(vocab)}, {torch.get_num_threads()} threads")
    print(f"tokens/s: {tokens / seconds:.0f}")
    print(f"achieved GFLOP/s: {achieved:.2f}")
    print(f"fp32 matmul peak GFLOP/s (2048^3 mm, same run): {peak:.2f}")
    print(f"share of peak: {100 * achieved / peak:.1f}%")
    print(f"peak RSS MiB: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")


if __name__ == "__main__":
    main()
