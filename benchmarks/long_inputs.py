"""Long inputs: how far windowed-and-stitched vectors are from unsplit ones, and what a 10,000-token input costs.

Usage: python benchmarks/long_inputs.py [--tokens 10000] [--model tests/fixtures/elmo] [--text FILE [--offsets 0 ...]]

Part 1 (distance) runs ``--model`` (a model name or directory; by default the fixture biLM, tests/fixtures/elmo)
on a long text, for several window contexts, and prints per layer the mean and the lowest cosine similarity and
the max abs difference between stitched and unsplit vectors. The text is the fixture's 30 sentences repeated, or
with ``--text`` a tokenized text file (one sentence a line, tokens split by spaces, the lines joined), from each
of ``--offsets`` (tokens into the file). Repeated sentences flatter a trained model: what a window lacks of its
context is the same text again, which the window holds (docs/long-inputs.md compares the two).

Part 2 (memory) runs each case in a fresh process on the `small` preset (2x1024_128, random weights; memory
does not depend on the values) and prints that process's own peak RSS (benchmarks/_peak_memory.py): the model
alone, one window, the long input windowed (one window at a time, and at the default batch of 32 windows), and
the long input unsplit; then the default batch on an input 4x as long, since windows bound memory by batch x
window, not by the input's length.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from _peak_memory import peak_rss_mib

from elmo.windows import MAX_WINDOW_TOKENS, WINDOW_CONTEXT

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "elmo"


def long_text(n_tokens: int) -> list[str]:
    batches = json.loads((FIXTURE / "sentences.json").read_text())
    words = [token for batch in batches for sentence in batch for token in sentence.split()]
    return [words[i % len(words)] for i in range(n_tokens)]


def text_stretch(path: Path, offset: int, n_tokens: int) -> list[str]:
    """``n_tokens`` tokens of a tokenized text file from token ``offset``, its lines joined."""
    words = path.read_text(encoding="utf-8").split()
    if offset + n_tokens > len(words):
        raise SystemExit(f"{path} has {len(words):,} tokens; --offsets {offset} needs {offset + n_tokens:,}")
    return words[offset : offset + n_tokens]


def distances(model: str, tokens: list[str], source: str) -> None:
    from elmo.embedder import Embedder

    n_tokens = len(tokens)
    # The reference is unsplit, one window holding the whole input, so it needs no context (the default context
    # would refuse a window of twice as many tokens or fewer).
    embedder = Embedder.load(model, max_window_tokens=n_tokens + 1, window_context=0)
    unsplit = embedder.embed([tokens])[0].astype(np.float64)
    print(f"distance of stitched from unsplit vectors, model {model}, {n_tokens} tokens of {source}")
    print(f"{'window':>7} {'context':>8}  " + "  ".join(f"layer {k}: mean cos / lowest cos / max |diff|"
                                                        for k in (1, 2)))
    for window, context in [(64, 8), (128, 16), (256, 32), (256, 64), (512, 64), (512, 128)]:
        stitched = Embedder.load(model, max_window_tokens=window, window_context=context).embed([tokens])[0]
        cells = []
        for layer in (1, 2):
            a, b = stitched[layer].astype(np.float64), unsplit[layer]
            cosine = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
            cells.append(f"{cosine.mean():.6f} / {cosine.min():.6f} / {np.abs(a - b).max():.2e}")
        print(f"{window:>7} {context:>8}  " + "  ".join(f"{cell:>42}" for cell in cells))


def memory_case(case: str, n_tokens: int) -> None:
    """Run in a child process: print its own peak RSS in MiB after one case."""
    from elmo import BiLM, BiLMConfig
    from elmo.embedder import Embedder

    torch.manual_seed(0)
    embedder = Embedder(BiLM(BiLMConfig.preset("small")))  # the default windows
    tokens = long_text(n_tokens)
    if case == "one-window":
        embedder.embed([tokens[:MAX_WINDOW_TOKENS]])
    elif case == "windowed-batch1":
        embedder.embed([tokens], batch_size=1)
    elif case == "windowed-batch32":
        embedder.embed([tokens])
    elif case == "unsplit":
        embedder.max_window_tokens = n_tokens + 1
        embedder.embed([tokens])
    print(peak_rss_mib())


def memory(n_tokens: int) -> None:
    print(f"\npeak RSS, small preset (2x1024_128), window {MAX_WINDOW_TOKENS} / context {WINDOW_CONTEXT} (the "
          f"defaults), {n_tokens}-token input")
    output_mib = 3 * n_tokens * 256 * 4 / 2**20
    cases = [(case, n_tokens) for case in ("model-only", "one-window", "windowed-batch1", "windowed-batch32",
                                           "unsplit")]
    for case, tokens in [*cases, ("windowed-batch32", 4 * n_tokens)]:
        result = subprocess.run([sys.executable, __file__, "--memory-case", case, "--tokens", str(tokens)],
                                capture_output=True, text=True, check=True)
        print(f"  {case:>16}, {tokens:>6} tokens: {float(result.stdout.strip()):8.0f} MiB")
    print(f"  (the returned (3, {n_tokens}, 256) float32 array itself is {output_mib:.0f} MiB; 4x that at 4x tokens)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=10_000)
    parser.add_argument("--model", default=str(FIXTURE), help="the model of part 1, the distances (name or directory)")
    parser.add_argument("--text", type=Path, help="part 1 on this tokenized text instead of repeated sentences")
    parser.add_argument("--offsets", type=int, nargs="+", default=[0], help="with --text: where each stretch starts")
    parser.add_argument("--memory-case")
    args = parser.parse_args()
    if args.memory_case:
        memory_case(args.memory_case, args.tokens)
    else:
        n_distance = min(args.tokens, 2000)
        if args.text is None:
            distances(args.model, long_text(n_distance), "the fixture's sentences, repeated")
        for offset in args.offsets if args.text is not None else []:
            distances(args.model, text_stretch(args.text, offset, n_distance), f"{args.text} from token {offset:,}")
        memory(args.tokens)
