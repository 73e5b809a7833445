"""Training throughput of the biLM on this machine, in one run: tokens/s, achieved GFLOP/s and their share of the
fp32 matmul peak measured in the same run, and peak RSS, for each preset, batch size, thread count and kernel path.

    python benchmarks/train_throughput.py             # tiny and small, 64 and 128 rows, 1 and 2 threads
    python benchmarks/train_throughput.py --configs tiny --batch-sizes 64 --threads 2 --baseline-src /tmp/old/src

Paths: ``paired`` (the training kernels: both directions' LSTM layers with their own backward, the sampled softmax's
own backward) and ``step-loop`` (autograd through each direction's step loop, ``LanguageModel.reference_kernels``);
``paired-glibc-malloc`` is ``paired`` with glibc returning freed memory on its own (``elmo.memory.keep_freed_memory``
not called); ``paired-mapped`` is ``paired`` with glibc mapping each block above 32 MiB on its own
(``elmo.memory.large_blocks_from_heap`` not entered: it matters where a step's tensors pass 32 MiB, as at the
shipped en's 512 rows); ``paired-bf16`` is ``paired``
with its matrix products on bfloat16 copies (``--precision bfloat16``; its GFLOP/s are still held against the float32
peak).
``--baseline-src`` adds a ``baseline`` path: the same step run by another checkout's ``src`` (say, the code before
the training kernels, which runs its ``step-loop``; ``--baseline-path paired-bf16`` runs an earlier checkout's
bfloat16 kernels instead), so both are measured side by side; the ratio column is against ``step-loop``, or
against ``baseline`` where ``step-loop`` does not run. Each measurement runs in its own process, so its peak RSS is its
own (benchmarks/_peak_memory.py); the matmul peak (the better of 2048^3 ``torch.mm`` and, on a CPU, oneDNN's
product on a reordered weight, which the training kernels' products run on) is measured in this process at each
thread count. ``--repeats N`` measures every path N times, in rounds whose path order rotates (so that a host
drifting within a round does not favour the path that runs first each time); the table then gives the medians,
and the ratio column each round's ratio after the median.
``--device cuda`` runs the steps on the GPU (each step's time ends at a synchronize) against the GPU's fp32 peak
(best of 8192^3 ``torch.mm``, TF32 off as PyTorch leaves it), and adds the peak GPU memory allocated.

The corpus is synthetic (Zipf-distributed words drawn from ``--vocab-size`` types, sentence lengths 5-40), written
to a temporary directory; the model's vocabulary is the types that occur and the specials (14,666 at the default
20,000), printed in the header. Speed depends on the model and the number of distinct tokens per batch, not on
meaning. FLOPs are counted analytically (a multiply-add is 2) as docs/training.md spells out: the char CNN over
each batch's distinct tokens at the character positions its max needs (the longest token plus the widest filter),
highways, projection, both LSTM stacks (input, recurrent and projection products), the sampled softmax (target +
negatives); backward = 2 x forward.
"""

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from _peak_memory import peak_rss_mib
from _timing import matmul_peaks, synchronize

from elmo.config import BiLMConfig

if TYPE_CHECKING:
    from elmo.training.corpus import Corpus
    from elmo.training.vocab import Vocabulary

PATHS = ("step-loop", "paired")
GLIBC_MALLOC = "paired-glibc-malloc"  # the paired path with glibc's own trimming (elmo train before keep_freed_memory)
MAPPED = "paired-mapped"  # the paired path with glibc mapping large blocks (elmo train before large_blocks_from_heap)
BFLOAT16 = "paired-bf16"  # the paired path with its products in bfloat16 (elmo train --precision bfloat16)


def write_corpus(path: Path, n_sentences: int, n_words: int, seed: int) -> None:
    """Sentences of Zipf-ranked words drawn from ``n_words`` types; the rare ones never occur, so the vocabulary
    built from the corpus is smaller (14,663 of 20,000 types occur at the defaults)."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(n_words)]
    with path.open("w", encoding="utf-8") as handle:
        for _ in range(n_sentences):
            ranks = np.minimum(rng.zipf(1.2, size=rng.integers(5, 41)), n_words) - 1
            handle.write(" ".join(words[r] for r in ranks) + "\n")


def synthetic_corpus(path: Path, n_words: int) -> tuple["Corpus", "Vocabulary"]:
    """The benchmark's corpus, written to ``path``, and the vocabulary built from it (as `elmo train` builds one)."""
    from elmo.training.corpus import Corpus
    from elmo.training.vocab import Vocabulary

    write_corpus(path, 20000, n_words, seed=0)
    corpus = Corpus([str(path)])
    return corpus, Vocabulary.from_counts(corpus.count_tokens())


def forward_flops(config: BiLMConfig, char_ids: torch.Tensor, n_tokens: int, n_negatives: int,
                  vocab_size: int) -> float:
    """Forward FLOPs of one step over ``n_tokens`` positions per direction and the batch's distinct tokens."""
    cnn, lstm = config.char_cnn, config.lstm
    widest = max(width for width, _ in cnn.filters)
    used = int(((char_ids > 0) & (char_ids != 261)).sum(dim=1).max())
    n_positions = min(cnn.max_characters_per_token, used + widest)
    per_distinct = sum(2 * width * cnn.embedding_dim * n * (n_positions - width + 1) for width, n in cnn.filters)
    per_distinct += cnn.n_highway * 2 * 2 * cnn.n_filters**2
    if config.has_token_projection:
        per_distinct += 2 * cnn.n_filters * lstm.projection_dim
    # Each layer's input and recurrent products (every layer reads projection_dim wide inputs), its projection.
    per_layer = 2 * 4 * lstm.dim * 2 * lstm.projection_dim
    if lstm.has_projection:
        per_layer += 2 * lstm.dim * lstm.projection_dim
    per_token = lstm.n_layers * per_layer
    per_token += 2 * lstm.projection_dim * (min(n_negatives, vocab_size) + 1)  # sampled softmax
    return len(char_ids) * per_distinct + 2 * n_tokens * per_token  # two directions


def measure(args: argparse.Namespace) -> dict:
    """One configuration, path and thread count, in this process."""
    from elmo.training import trainer
    from elmo.training.batches import Batcher
    from elmo.training.language_model import LanguageModel, StepNoise, initialize_like_bilm_tf
    from elmo.training.presets import resolve_config

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    config = resolve_config(args.config)
    with tempfile.TemporaryDirectory() as directory:
        corpus_path = Path(directory) / "corpus.txt"
        corpus, vocab = synthetic_corpus(corpus_path, args.vocab_size)
        torch.manual_seed(0)
        model = LanguageModel(config, len(vocab))
        initialize_like_bilm_tf(model)
        model.reference_kernels = args.path == "step-loop"
        if args.path == BFLOAT16:
            if not hasattr(model, "product_dtype"):
                import elmo

                raise SystemExit(f"{args.path}: the code at {Path(elmo.__file__).parent} has no bfloat16 products")
            model.product_dtype = torch.bfloat16
        model.to(device)
        # The optimizer `elmo train` makes by default (bilm-tf's Adagrad), as the code under test makes it.
        optimizer = trainer._make_optimizer(model, trainer.TrainingOptions(corpus=[str(corpus_path)]))
        rows = range(args.batch_size)
        batcher = Batcher(corpus, vocab, rows, args.batch_size, args.unroll_steps, seed=0, max_epochs=None)
        state = model.bilm.zero_state(args.batch_size)
        state = type(state)(state.h.to(device), state.c.to(device))
        trimmer, heap = None, contextlib.nullcontext
        if args.trim:  # as elmo train does (the baseline's trainer did not)
            from elmo.memory import TRAINING_SLACK_SHARE, FreedMemoryTrimmer, keep_freed_memory, large_blocks_from_heap

            if args.path != GLIBC_MALLOC:
                keep_freed_memory()
            if args.path not in (GLIBC_MALLOC, MAPPED):
                heap = large_blocks_from_heap
            trimmer = FreedMemoryTrimmer(slack_share=TRAINING_SLACK_SHARE)
        flops, seconds = 0.0, 0.0
        for step in range(args.warmup + args.steps):
            start = time.perf_counter()
            inputs = batcher.next_batch()
            noise = StepNoise.draw(0, step, 0.1, args.negatives, len(vocab), rows, args.batch_size)
            # On the CPU the batch stays as built (the baseline's batches have no .to).
            with heap():
                output = model(inputs if device.type == "cpu" else inputs.to(device), state, noise)
                (output.loss * args.unroll_steps).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            state = output.state
            if trimmer is not None:
                trimmer.after_batch()
            synchronize(device)
            if step >= args.warmup:
                seconds += time.perf_counter() - start
                flops += 3 * forward_flops(config, inputs.char_ids, inputs.forward_tokens.numel(), args.negatives,
                                           len(vocab))
        batcher.close()
    tokens = args.steps * args.batch_size * args.unroll_steps
    import elmo

    gpu_mib = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else 0.0
    return {"source": elmo.__file__, "tokens_per_s": tokens / seconds, "gflops": flops / seconds / 1e9,
            "peak_rss_mib": peak_rss_mib(), "peak_gpu_mib": gpu_mib}


def measure_in_child(args: argparse.Namespace, config: str, batch_size: int, path: str, threads: int) -> dict | None:
    """One measurement in its own process (so its peak RSS is its own); None, said on stderr, if it failed."""
    source = args.baseline_src if path == "baseline" else Path(__file__).resolve().parents[1] / "src"
    run_path = args.baseline_path if path == "baseline" else path
    command = [sys.executable, __file__, "--one", "--config", config, "--batch-size", str(batch_size),
               "--path", run_path, "--thread-count", str(threads),
               "--unroll-steps", str(args.unroll_steps), "--negatives", str(args.negatives),
               "--vocab-size", str(args.vocab_size), "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--device", args.device,
               *(["--trim"] if run_path != "step-loop" else [])]
    env = {**os.environ, "PYTHONPATH": str(source), "OMP_NUM_THREADS": str(threads)}
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:  # said, and the other measurements go on
        print(f"{config}, {batch_size} rows, {path} failed:\n{done.stderr[-3000:]}", file=sys.stderr)
        return None
    return json.loads(done.stdout.splitlines()[-1])


def rotated(paths: list[str], round_index: int) -> list[str]:
    """``paths`` starting from the ``round_index``-th, so that over rounds each path runs in each position: a
    host that drifts within a round then does not favour one path every time."""
    shift = round_index % len(paths)
    return paths[shift:] + paths[:shift]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["tiny", "small"], help="preset names or options.json")
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[64, 128])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--paths", nargs="+", choices=[*PATHS, GLIBC_MALLOC, MAPPED, BFLOAT16, "baseline"],
                        default=list(PATHS))
    parser.add_argument("--baseline-src", type=Path, help="another checkout's src directory, run as path 'baseline'")
    parser.add_argument("--baseline-path", choices=[*PATHS, BFLOAT16], default="step-loop",
                        help="the path that checkout runs (step-loop: the code before the training kernels; "
                             f"{BFLOAT16}: an earlier checkout's bfloat16 kernels)")
    parser.add_argument("--unroll-steps", type=int, default=20)
    parser.add_argument("--negatives", type=int, default=8192)
    parser.add_argument("--vocab-size", type=int, default=20000,
                        help="word types the Zipf corpus draws from; the model's vocabulary is those that occur, "
                             "and the specials (printed)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1,
                        help="rounds of every path, each round in a rotated order; the table gives medians")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N]: where the steps run")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child process: one measurement
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--batch-size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--thread-count", type=int, dest="threads_one", help=argparse.SUPPRESS)
    parser.add_argument("--trim", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        args.threads = args.threads_one
        print(json.dumps(measure(args)))
        return
    paths = list(args.paths)
    if args.baseline_src is not None and "baseline" not in paths:
        paths.insert(0, "baseline")
    if "baseline" in paths and args.baseline_src is None:
        parser.error("--paths baseline needs --baseline-src")
    if args.repeats < 1:
        parser.error(f"--repeats is {args.repeats}; expected 1 or more")
    # The ratio column: against this checkout's step loop, or where only another checkout's runs, against that.
    reference = "baseline" if "baseline" in paths and "step-loop" not in paths else "step-loop"

    device = torch.device(args.device)
    gpu = f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""
    with tempfile.TemporaryDirectory() as directory:
        _, vocab = synthetic_corpus(Path(directory) / "corpus.txt", args.vocab_size)
    rounds = f"; median of {args.repeats} rounds, each in a rotated path order" if args.repeats > 1 else ""
    print(f"{args.unroll_steps} steps per row, {args.negatives} negatives, vocabulary {len(vocab):,} (the tokens "
          f"that occur of {args.vocab_size:,} Zipf-drawn word types, and the specials), "
          f"{args.steps} timed steps after {args.warmup} on {device}{gpu}{rounds}; 'of peak' = achieved / the larger "
          "fp32 matmul peak (torch.mm's, and on a CPU oneDNN's)")
    print(f"| config | rows | threads | path | tokens/s | GFLOP/s | matmul peak | of peak | x {reference} | "
          "peak RSS MiB | peak GPU MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for threads in args.threads:
        torch.set_num_threads(threads)
        for config in args.configs:
            for batch_size in args.batch_sizes:
                by_round: list[dict[str, dict]] = []
                for round_index in range(args.repeats):
                    results = {}
                    for path in rotated(paths, round_index):
                        result = measure_in_child(args, config, batch_size, path, threads)
                        if result is not None:
                            results[path] = result
                    by_round.append(results)
                peak = max(matmul_peaks(device).values())
                for path in paths:
                    runs = [results[path] for results in by_round if path in results]
                    if not runs:
                        continue
                    ratios = [results[path]["tokens_per_s"] / results[reference]["tokens_per_s"]
                              for results in by_round if path in results and reference in results]
                    versus = f"{statistics.median(ratios):.2f}" if ratios else "nan"
                    if len(ratios) > 1:
                        versus += f" ({', '.join(f'{ratio:.2f}' for ratio in ratios)})"
                    tokens_per_s = statistics.median(run["tokens_per_s"] for run in runs)
                    gflops = statistics.median(run["gflops"] for run in runs)
                    rss = max(run["peak_rss_mib"] for run in runs)
                    gpu_mib = max(run["peak_gpu_mib"] for run in runs)
                    print(f"| {config} | {batch_size} | {threads} | {path} | {tokens_per_s:.0f} | {gflops:.1f} | "
                          f"{peak:.0f} | {100 * gflops / peak:.0f} % | {versus} | {rss:.0f} | {gpu_mib:.0f} |",
                          flush=True)


if __name__ == "__main__":
    main()
