"""Model sizes for training by name: the published ones (``elmo.config.PRESETS``) and ``tiny``, a biLM
that learns something useful from a few million tokens in about an hour on two CPU cores."""

from pathlib import Path

from elmo.config import PRESETS, BiLMConfig, CharCNNConfig, LSTMConfig

TRAINING_PRESETS: dict[str, BiLMConfig] = {
    **PRESETS,
    "tiny": BiLMConfig(
        char_cnn=CharCNNConfig(
            embedding_dim=16, filters=((1, 32), (2, 32), (3, 64), (4, 128), (5, 256)), n_highway=1, activation="relu"
        ),
        lstm=LSTMConfig(dim=512, projection_dim=128, n_layers=2, cell_clip=3.0, proj_clip=3.0,
                        use_skip_connections=True),
    ),
}


def resolve_config(name_or_path: str) -> BiLMConfig:
    """A preset name or an options.json path."""
    if name_or_path in TRAINING_PRESETS:
        return TRAINING_PRESETS[name_or_path]
    if Path(name_or_path).suffix == ".json" or Path(name_or_path).exists():
        return BiLMConfig.load(name_or_path)
    raise ValueError(f"--config {name_or_path!r} is neither a preset ({', '.join(sorted(TRAINING_PRESETS))}) "
                     "nor an options.json file")
