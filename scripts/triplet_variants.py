"""Triplet rate and nearest-neighbour agreement of a model's vectors read in other ways than as they come: each
direction's half, sums and differences of layers, and with directions common to all text taken out (centering,
z-scoring, removing the top principal components, as is done against the anisotropy of contextual vectors).

    python scripts/triplet_variants.py --model en --text corpus/valid.txt [--lines 3000]

The corpus statistics (mean, standard deviation, principal components) come from ``--text``: held-out text of
the model's corpus (not the polysemy set), tokenized already, tokens split at whitespace as training reads them.
"""

import argparse

import numpy as np

from elmo import Embedder
from elmo.polysemy import LANGUAGES, load_sentences, nn_agreement, triplet_rate, vectors_by_sense, word_vectors

TOP_COMPONENTS = (1, 3, 5, 10)


def corpus_tokens(embedder: Embedder, path: str, n_lines: int) -> np.ndarray:
    """``(tokens, layers, dim)``: every token vector of the non-empty lines among the first ``n_lines`` of
    ``path``."""
    with open(path, encoding="utf-8") as handle:
        lines = [tokens for tokens in (next(handle, "").split() for _ in range(n_lines)) if tokens]
    return np.concatenate([layers.transpose(1, 0, 2) for layers in embedder.embed(lines, "all")])


def variants(vectors: np.ndarray, tokens: np.ndarray) -> dict[str, np.ndarray]:
    """Name -> ``(sentences, dim)``: the target words' vectors read each way. ``vectors``: ``(layers,
    sentences, dim)``; ``tokens``: the corpus's ``(tokens, layers, dim)``."""
    half = vectors.shape[-1] // 2
    out: dict[str, np.ndarray] = {}
    for k in range(1, len(vectors)):
        corpus = tokens[:, k].astype(np.float64)
        mean, std = corpus.mean(axis=0), corpus.std(axis=0)
        components = np.linalg.svd(corpus - mean, full_matrices=False)[2]
        centered = vectors[k] - mean
        out[f"layer {k}"] = vectors[k]
        out[f"layer {k} forward half"] = vectors[k][:, :half]
        out[f"layer {k} backward half"] = vectors[k][:, half:]
        out[f"layer {k} centered"] = centered
        out[f"layer {k} z-scored"] = centered / std
        for top in TOP_COMPONENTS:
            out[f"layer {k} less top {top} PCs"] = centered - (centered @ components[:top].T) @ components[:top]
    # A layer less the one below it: for layer 2 the LSTM's own output (the residual out); layer 1 has no residual
    # connection (bilm-tf adds none to the first layer), so there it takes out the context-free vector
    for k in range(1, len(vectors)):
        out[f"layer {k} - layer {k - 1}"] = vectors[k] - vectors[k - 1]
    out["layers 1 + 2"] = vectors[1] + vectors[2]
    out["layers 0 + 1 + 2"] = vectors.sum(axis=0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="en", help="a shipped model name or a model directory")
    parser.add_argument("--language", choices=LANGUAGES, help="which polysemy set (default: the model's name)")
    parser.add_argument("--text", required=True, help="held-out text of the model's corpus, one sentence a line")
    parser.add_argument("--lines", type=int, default=3000, help="lines of --text to take statistics from")
    args = parser.parse_args()
    language = args.language or args.model
    if language not in LANGUAGES:
        parser.error(f"--language is needed for model {args.model!r} (one of {', '.join(LANGUAGES)})")

    embedder = Embedder.load(args.model)
    tokens = corpus_tokens(embedder, args.text, args.lines)
    sentences = load_sentences(language)
    vectors = word_vectors(embedder, sentences).astype(np.float64)
    print(f"{args.model} on the {language} set; corpus statistics from {len(tokens):,} tokens of {args.text}")
    print(f"{'':<28}{'triplet':>9}{'nn':>9}")
    for name, read in variants(vectors, tokens).items():
        grouped = vectors_by_sense(sentences, read)
        print(f"{name:<28}{triplet_rate(grouped):>9.3f}{nn_agreement(grouped):>9.3f}")


if __name__ == "__main__":
    main()
