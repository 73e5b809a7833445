"""Per-layer triplet rate and same-word nearest-neighbour sense agreement of a model on a polysemy set, with the
same measures for random weights of the same shape as the floor.

    python scripts/triplet_rate.py [--model en] [--language en] [--seeds 0 1 2] [--words]

The sets and the measures are described in elmo/polysemy. --language defaults to the model's name when that is
a shipped language (en, zh). Layer 0 is context-free: every occurrence of a word gets the same vector, so it
scores 0 on both measures (ties fail).
"""

import argparse

from elmo import Embedder
from elmo.polysemy import LANGUAGES, PolysemyScores, evaluate_model, load_sentences, random_weights_embedder


def _row(name: str, values: list[float]) -> str:
    return f"{name:<26}" + "".join(f"{value:>9.3f}" for value in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="en", help="a shipped model name or a model directory")
    parser.add_argument("--language", choices=LANGUAGES, help="which polysemy set (default: the model's name)")
    parser.add_argument("--seeds", type=int, nargs="*", default=[0],
                        help="seeds of the random-weights floor, one model each (none: skip the floor)")
    parser.add_argument("--words", action="store_true", help="also print each word's figures for the model")
    args = parser.parse_args()
    language = args.language or args.model
    if language not in LANGUAGES:
        parser.error(f"--language is needed for model {args.model!r} (one of {', '.join(LANGUAGES)})")

    sentences = load_sentences(language)
    print(f"polysemy set {language}: {len({s.word for s in sentences})} words, {len(sentences)} sentences")
    trained = evaluate_model(Embedder.load(args.model), language)
    floors = [evaluate_model(random_weights_embedder(args.model, seed), language) for seed in args.seeds]

    header = f"{'':<26}" + "".join(f"{f'layer {k}':>9}" for k in range(trained.n_layers))
    for measure in ("triplet_rate", "nn_agreement"):
        print(f"\n{measure.replace('_', ' ')}\n{header}")
        print(_row(f"{args.model}", getattr(trained, measure)))
        for seed, floor in zip(args.seeds, floors, strict=True):
            print(_row(f"random weights (seed {seed})", getattr(floor, measure)))
    if args.words:
        _print_words(trained)


def _print_words(scores: PolysemyScores) -> None:
    print("\nper word: triplet rate / nn agreement, layers 1..")
    for word in sorted(scores.words, key=lambda word: max(word.triplet_rate)):
        rates = "  ".join(f"{t:.2f}/{n:.2f}" for t, n in zip(word.triplet_rate[1:], word.nn_agreement[1:], strict=True))
        print(f"  {word.word:<12} {word.n_sentences:>3} sentences  {rates}")


if __name__ == "__main__":
    main()
