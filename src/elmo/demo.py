"""The main job: one word in sentences of different senses, and how close its vectors are, layer by layer.

A static embedding gives every occurrence the same vector (similarity 1 everywhere); layer 0 of ELMo is
exactly such a static, context-free vector. The contextual layers should put occurrences of the same
sense closer together than occurrences of different senses. The demo prints the cosine matrices, says
for each layer whether that pattern holds, and draws the matrices as a heat map.
"""

from dataclasses import dataclass

import numpy as np

from elmo.embedder import Embedder
from elmo.similarity import cosine_matrices


@dataclass(frozen=True)
class SenseExample:
    word: str
    label: str  # the word as plot titles show it (Latin script: fonts for Chinese may be missing)
    language: str  # which shipped model reads it: "en" or "zh"
    sentences: tuple[tuple[str, tuple[str, ...]], ...]  # (sense, tokens)


EXAMPLES = (
    SenseExample("bank", "bank", "en", (
        ("river", tuple("we sat on the bank of the river and watched the water".split())),
        ("river", tuple("the boat drifted toward the muddy bank of the stream".split())),
        ("money", tuple("she deposited the money at the bank on monday".split())),
        ("money", tuple("the bank raised interest rates on loans".split())),
    )),
    SenseExample("play", "play", "en", (
        ("sport", tuple("the shortstop made a spectacular play on the grounder".split())),
        ("sport", tuple("a late defensive play saved the game for the home team".split())),
        ("theatre", tuple("she was cast in a broadway play by a famous playwright".split())),
        ("theatre", tuple("the actors rehearsed the new play before opening night".split())),
    )),
    SenseExample("小米", "xiaomi", "zh", (
        ("millet", ("我", "喜欢", "吃", "小米", "粥")),
        ("millet", ("农民", "在", "田里", "种", "小米", "和", "高粱")),
        ("brand", ("小米", "手机", "很", "好用")),
        ("brand", ("小米", "公司", "发布", "了", "新", "手机")),
    )),
)


@dataclass(frozen=True)
class SenseResult:
    example: SenseExample
    similarities: np.ndarray  # (n_layers, n_sentences, n_sentences) cosine
    separates: list[bool]  # per layer: mean same-sense similarity > mean other-sense similarity


def word_vectors(embedder: Embedder, example: SenseExample) -> np.ndarray:
    """``(n_layers, n_sentences, dim)``: the word's vectors in each sentence (first occurrence)."""
    token_lists = [list(tokens) for _, tokens in example.sentences]
    for tokens in token_lists:
        if example.word not in tokens:
            raise ValueError(f"{example.word!r} is not a token of {' '.join(tokens)!r}")
    layers = embedder.embed(token_lists, "all")
    return np.stack([layer[:, tokens.index(example.word)] for layer, tokens in zip(layers, token_lists, strict=True)],
                    axis=1)


def sense_similarities(embedder: Embedder, example: SenseExample) -> SenseResult:
    similarities = cosine_matrices(word_vectors(embedder, example))
    senses = np.array([sense for sense, _ in example.sentences])
    same = (senses[:, None] == senses[None, :]) & ~np.eye(len(senses), dtype=bool)
    other = senses[:, None] != senses[None, :]
    separates = [bool(layer[same].mean() > layer[other].mean()) for layer in similarities]
    return SenseResult(example, similarities, separates)


def plot(results: list[SenseResult], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_layers = results[0].similarities.shape[0]
    figure, axes = plt.subplots(len(results), n_layers, figsize=(3.2 * n_layers, 3.0 * len(results)), squeeze=False)
    for row, result in enumerate(results):
        labels = [sense for sense, _ in result.example.sentences]
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
    figure.savefig(path, dpi=100)
    plt.close(figure)


def run_demo(model: str | None, out_png: str) -> int:
    """Print the tables; ``model`` overrides the shipped model of every language."""
    embedders: dict[str, Embedder] = {}
    results = []
    for example in EXAMPLES:
        name = model or example.language
        if name not in embedders:
            embedders[name] = Embedder.load(name)
        result = sense_similarities(embedders[name], example)
        results.append(result)
        print(f"\n{example.word!r} with model {name}:")
        for layer, matrix in enumerate(result.similarities):
            label = "layer 0 (static)" if layer == 0 else f"layer {layer}"
            verdict = "same sense closer" if result.separates[layer] else "DOES NOT separate the senses"
            print(f"  {label}: {verdict}")
            for (sense, tokens), values in zip(example.sentences, matrix, strict=True):
                print(f"    {sense:>8} {' '.join(f'{v:+.2f}' for v in values)}   {' '.join(tokens)}")
    plot(results, out_png)
    print(f"\nheat map written to {out_png}")
    return 0
