"""Material shared by the training tests: a micro biLM and a small synthetic corpus."""

import random
from pathlib import Path

from elmo.config import BiLMConfig, CharCNNConfig, LSTMConfig

MICRO_CONFIG = BiLMConfig(
    char_cnn=CharCNNConfig(embedding_dim=8, filters=((1, 8), (2, 8), (3, 16)), n_highway=1, activation="relu"),
    lstm=LSTMConfig(dim=32, projection_dim=16, n_layers=2, cell_clip=3.0, proj_clip=3.0, use_skip_connections=True),
)


def write_synthetic_corpus(path: Path, n_sentences: int, seed: int = 0) -> Path:
    """Sentences from a small stochastic grammar: learnable structure, varied lengths (1 to ~30 tokens)."""
    rng = random.Random(seed)
    nouns = ["cat", "dog", "bird", "fish", "horse", "teacher", "doctor", "river", "city", "house"]
    verbs = ["sees", "likes", "follows", "finds", "paints", "visits"]
    adjectives = ["big", "small", "red", "old", "quiet"]
    lines = []
    for _ in range(n_sentences):
        words = []
        for clause in range(rng.choice([1, 1, 2, 3])):
            if clause:
                words.append("and")
            for role in ("subject", "object"):
                words.append("the")
                words += rng.sample(adjectives, rng.randint(0, 2))
                words.append(rng.choice(nouns))
                if role == "subject":
                    words.append(rng.choice(verbs))
        words.append(".")
        lines.append(" ".join(words))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
