"""Triplet rate and nearest-neighbour agreement of a model's vectors read in other ways than as they come: each
direction's half, sums and differences of layers, and with directions common to all text taken out (centering,
z-scoring, removing the top principal components, as is done against the anisotropy of contextual vectors), and
computed from a warmed LSTM state instead of a zero one.

    python scripts/triplet_variants.py --model en --text corpus/valid.txt [--lines 3000] [--warm-lines 10]

The corpus statistics (mean, standard deviation, principal components) come from ``--text``: held-out text of
the model's corpus (not the polysemy set), tokenized already, tokens split at whitespace as training reads them.
"""

import argparse

import numpy as np

from elmo import Embedder
from elmo.polysemy import (
    LANGUAGES,
    SenseSentence,
    load_sentences,
    nn_agreement,
    triplet_rate,
    vectors_by_sense,
    word_vectors,
)
from elmo.stateful_embedder import StatefulEmbedder

TOP_COMPONENTS = (1, 3, 5, 10)


def corpus_tokens(embedder: Embedder, path: str, n_lines: int) -> np.ndarray:
    """``(tokens, layers, dim)``: every token vector of the non-empty lines among the first ``n_lines`` of
    ``path``."""
    return np.concatenate([layers.transpose(1, 0, 2) for layers in embedder.embed(read_lines(path, n_lines), "all")])


def read_lines(path: str, n_lines: int) -> list[list[str]]:
    """The non-empty lines among the first ``n_lines`` of ``path``, split at whitespace."""
    with open(path, encoding="utf-8") as handle:
        return [tokens for tokens in (next(handle, "").split() for _ in range(n_lines)) if tokens]


def warmed_vectors(embedder: Embedder, sentences: list[SenseSentence], warm_lines: list[list[str]]) -> np.ndarray:
    """``(layers, sentences, dim)``: each target word's vectors with its sentence read from the LSTM state that
    reading ``warm_lines`` one after another leaves (as bilm-tf's stateful inference reads a sentence after
    others), where the embedder starts every sentence from zero, a state training shows a row only at resets."""
    stateful = StatefulEmbedder(embedder.bilm, embedder.tokenizer_name)
    rows = []
    for sentence in sentences:
        stateful.reset_state()
        stateful.warm_up(warm_lines, batch_size=1)
        rows.append(stateful.embed([list(sentence.tokens)], "all", 1)[0][:, sentence.index])
    return np.stack(rows, axis=1)


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
    parser.add_argument("--warm-lines", type=int, default=10,
                        help="lines of --text read before each sentence for the warmed-state rows (0: none)")
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
    read_ways = variants(vectors, tokens)
    if args.warm_lines and embedder.tokenizer_name != "chars":  # the stored tokens are words, not characters
        warmed = warmed_vectors(embedder, sentences, read_lines(args.text, args.warm_lines)).astype(np.float64)
        read_ways |= {f"layer {k} from a warmed state": warmed[k] for k in range(1, len(warmed))}
    for name, read in read_ways.items():
        grouped = vectors_by_sense(sentences, read)
        print(f"{name:<28}{triplet_rate(grouped):>9.3f}{nn_agreement(grouped):>9.3f}")


if __name__ == "__main__":
    main()
