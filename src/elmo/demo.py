"""The main job: one word in sentences of different senses, and how close its vectors are, layer by layer.

A static embedding gives every occurrence the same vector (similarity 1 everywhere); layer 0 of ELMo is
exactly such a static, context-free vector. The contextual layers should put occurrences of the same
sense closer together than occurrences of different senses. The demo prints the cosine matrices, says
for each layer whether that pattern holds, and draws the matrices as a heat map.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from elmo.embedder import Embedder
from elmo.polysemy import word_vectors
from elmo.sense_examples import DEMO_EXAMPLES, POLYSEMY_EXAMPLES, SenseExample
from elmo.similarity import cosine_matrices


@dataclass(frozen=True)
class SenseResult:
    example: SenseExample
    similarities: np.ndarray  # (n_layers, n_sentences, n_sentences) cosine
    margins: list[float]  # per layer: mean same-sense similarity - mean other-sense similarity

    @property
    def separates(self) -> list[bool]:
        """Per layer: are occurrences of the same sense closer, on average, than those of different senses?
        (By more than float32 rounding: a token's context-free vector computed in two batches may differ in
        the last bits, which is not separation.)"""
        return [margin > 1e-6 for margin in self.margins]


def sense_similarities(embedder: Embedder, example: SenseExample) -> SenseResult:
    """The word's vectors as the polysemy measures take them (``elmo.polysemy.word_vectors``: a model reading
    characters gets the mean of the word's characters), compared between every pair of sentences."""
    similarities = cosine_matrices(word_vectors(embedder, example.sentences))
    senses = np.array([sentence.sense for sentence in example.sentences])
    same = (senses[:, None] == senses[None, :]) & ~np.eye(len(senses), dtype=bool)
    other = senses[:, None] != senses[None, :]
    margins = [float(layer[same].mean() - layer[other].mean()) for layer in similarities]
    return SenseResult(example, similarities, margins)


def separation_rates(results: Sequence[SenseResult]) -> list[float]:
    """Per layer: the share of words whose senses that layer separates."""
    return np.mean([result.separates for result in results], axis=0).tolist()


def plot(results: list[SenseResult], path: str) -> None:
    """The heat maps as a PNG at ``path`` (``save_png``: the old file stays whole if the write is stopped)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from elmo.search.senses import save_png

    n_layers, n_sentences, _ = results[0].similarities.shape
    side = 1.2 + 0.4 * n_sentences  # inches per matrix: room for each cell's printed value
    figure, axes = plt.subplots(len(results), n_layers, figsize=(side * n_layers, side * len(results)), squeeze=False)
    for row, result in enumerate(results):
        labels = [sentence.sense for sentence in result.example.sentences]
        lowest = float(result.similarities.min())
        for layer in range(n_layers):
            axis = axes[row, layer]
            matrix = result.similarities[layer]
            axis.imshow(matrix, vmin=min(lowest, 0.99), vmax=1.0, cmap="viridis")
            for (i, j), value in np.ndenumerate(matrix):
                axis.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7, color="white")
            axis.set_xticks(range(len(labels)), labels, rotation=45, fontsize=7)
            axis.set_yticks(range(len(labels)), labels, fontsize=7)
            kind = "static (layer 0)" if layer == 0 else f"layer {layer}"
            axis.set_title(f"{result.example.label}: {kind}", fontsize=9)
    figure.suptitle("cosine similarity of one word's vectors across sentences")
    figure.tight_layout()
    try:
        save_png(figure, Path(path), dpi=100)
    finally:
        plt.close(figure)


def run_demo(model: str | None, out_png: str) -> int:
    """Print the tables and the larger set's separation rates; ``model`` overrides the shipped model of
    every language. ``out_png`` is checked before any model loads (``png_path``: a name ending in .png where a
    file can be written; missing folders are made)."""
    from elmo.search.senses import png_path  # the check `elmo senses` makes of its --out

    png_path(out_png)
    embedders: dict[str, Embedder] = {}

    def score(example: SenseExample) -> SenseResult:
        name = model or example.language
        if name not in embedders:
            embedders[name] = Embedder.load(name)
        return sense_similarities(embedders[name], example)

    results = []
    for example in DEMO_EXAMPLES:
        result = score(example)
        results.append(result)
        print(f"\n{example.word!r} with model {model or example.language}:")
        for layer, matrix in enumerate(result.similarities):
            label = "layer 0 (static)" if layer == 0 else f"layer {layer}"
            verdict = "same sense closer" if result.separates[layer] else "DOES NOT separate the senses"
            print(f"  {label}: {verdict} (same minus other sense: {result.margins[layer]:+.3f})")
            for sentence, values in zip(example.sentences, matrix, strict=True):
                print(f"    {sentence.sense:>8} {' '.join(f'{v:+.2f}' for v in values)}   {' '.join(sentence.tokens)}")
    plot(results, out_png)
    print(f"\nheat map written to {out_png}")

    for language in sorted({example.language for example in POLYSEMY_EXAMPLES}):
        examples = [example for example in POLYSEMY_EXAMPLES if example.language == language]
        language_results = [score(example) for example in examples]
        rates = ", ".join(f"layer {layer} {rate:.0%}" for layer, rate in enumerate(separation_rates(language_results)))
        print(f"\n{len(examples)} polysemous {language} words, share whose senses each layer separates: {rates}")
        missed = [result.example.word for result in language_results if not result.separates[-1]]
        print(f"  not separated by the top layer: {', '.join(missed) or 'none'}")
    return 0
