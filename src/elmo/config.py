"""The biLM's shape, as bilm-tf's ``options.json`` describes it, held in frozen dataclasses.

``BiLMConfig.from_options`` reads the JSON dict (checking every field, naming the one at fault) and
``to_options`` writes it back in the same layout, so files round-trip and other ELMo tools read ours.

Sizes are bounded (``MAX_SIZES``, ``MAX_PARAMETERS``; table in docs/model.md) so that a hostile or mistyped
options.json is refused at once instead of after minutes and gigabytes of building.
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The char CNN of every published ELMo: 2048 filters over 16-dim character embeddings.
_PUBLISHED_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))
# The character ids of ``elmo.characters``: 1..CHARACTER_IDS, 0 meaning no character. A published char table has a
# row for each; its options say 261 (training dumps) or N_CHARACTERS, 262 (with the zero row), for the same scheme.
CHARACTER_IDS = 261
N_CHARACTERS = 262
_ACCEPTED_N_CHARACTERS = (CHARACTER_IDS, N_CHARACTERS)

# Generous multiples of the largest published model ("original", in the comments), far from absurd.
MAX_SIZES = {
    "char_cnn.embedding.dim": 1024,  # 16
    "char_cnn.filters entries": 64,  # 7
    "char_cnn.filters total": 16_384,  # 2048
    "char_cnn.n_highway": 16,  # 2
    "char_cnn.max_characters_per_token": 1024,  # 50
    "lstm.dim": 32_768,  # 4096
    "lstm.projection_dim": 8192,  # 512
    "lstm.n_layers": 32,  # 2
}
# 23 times the original's 93.6M; 8 GiB in float32.
MAX_PARAMETERS = 2**31


class ConfigError(ValueError):
    """options.json does not describe a biLM we can build."""


@dataclass(frozen=True)
class CharCNNConfig:
    """Token encoder: character embeddings -> one Conv1d per (width, n_filters) -> highways -> projection."""

    embedding_dim: int
    filters: tuple[tuple[int, int], ...]
    n_highway: int
    activation: str
    max_characters_per_token: int = 50
    n_characters: int = N_CHARACTERS

    @property
    def n_filters(self) -> int:
        return sum(n for _, n in self.filters)


@dataclass(frozen=True)
class LSTMConfig:
    """Each direction: ``n_layers`` LSTMs of ``dim`` cells projected to ``projection_dim``; clip 0 = none."""

    dim: int
    projection_dim: int
    n_layers: int
    cell_clip: float
    proj_clip: float
    use_skip_connections: bool

    @property
    def has_projection(self) -> bool:
        """bilm-tf adds the projection W_P_0 only when it makes the state smaller."""
        return self.projection_dim < self.dim


@dataclass(frozen=True)
class BiLMConfig:
    char_cnn: CharCNNConfig
    lstm: LSTMConfig

    @property
    def has_token_projection(self) -> bool:
        """bilm-tf projects the CNN output (CNN_proj) only when its width differs from projection_dim."""
        return self.char_cnn.n_filters != self.lstm.projection_dim

    @property
    def output_dim(self) -> int:
        """Width of every ELMo layer: forward and backward halves."""
        return 2 * self.lstm.projection_dim

    @property
    def n_output_layers(self) -> int:
        return self.lstm.n_layers + 1

    @property
    def n_parameters(self) -> int:
        """The BiLM's parameter count, known before anything is allocated."""
        cnn, lstm = self.char_cnn, self.lstm
        count = CHARACTER_IDS * cnn.embedding_dim + sum(width * cnn.embedding_dim * n + n for width, n in cnn.filters)
        count += cnn.n_highway * 2 * (cnn.n_filters**2 + cnn.n_filters)
        if self.has_token_projection:
            count += cnn.n_filters * lstm.projection_dim + lstm.projection_dim
        per_layer = 4 * lstm.dim * (2 * lstm.projection_dim + 1)  # input + recurrent weights, bias
        if lstm.has_projection:
            per_layer += lstm.dim * lstm.projection_dim
        return count + 2 * lstm.n_layers * per_layer

    @classmethod
    def from_options(cls, options: dict[str, Any], source: str = "options") -> "BiLMConfig":
        cnn = _section(options, "char_cnn", source)
        lstm = _section(options, "lstm", source)
        embedding = _section(cnn, "embedding", f"{source}: char_cnn")
        # bilm-tf's training options keep its hyperparameters (batch_size, dropout, ...) at the top level, so only
        # the model's sections are closed: a misspelled key there would silently leave its field at the default.
        _refuse_unknown_keys(cnn, _CHAR_CNN_KEYS, f"{source}: char_cnn")
        _refuse_unknown_keys(embedding, _EMBEDDING_KEYS, f"{source}: char_cnn.embedding")
        _refuse_unknown_keys(lstm, _LSTM_KEYS, f"{source}: lstm")
        filters_raw = _field(cnn, "filters", list, f"{source}: char_cnn")
        filters = []
        for index, pair in enumerate(filters_raw):
            if not (isinstance(pair, list | tuple) and len(pair) == 2 and all(_is_int(v) for v in pair)):
                raise ConfigError(f"{source}: char_cnn.filters[{index}] is {pair!r}; expected [width, n_filters]")
            filters.append((int(pair[0]), int(pair[1])))
        config = cls(
            char_cnn=CharCNNConfig(
                embedding_dim=_field(embedding, "dim", int, f"{source}: char_cnn.embedding"),
                filters=tuple(filters),
                n_highway=_field(cnn, "n_highway", int, f"{source}: char_cnn", default=0),
                activation=_field(cnn, "activation", str, f"{source}: char_cnn"),
                max_characters_per_token=_field(
                    cnn, "max_characters_per_token", int, f"{source}: char_cnn", default=50
                ),
                n_characters=_field(cnn, "n_characters", int, f"{source}: char_cnn", default=N_CHARACTERS),
            ),
            lstm=LSTMConfig(
                dim=_field(lstm, "dim", int, f"{source}: lstm"),
                projection_dim=_field(lstm, "projection_dim", int, f"{source}: lstm"),
                n_layers=_field(lstm, "n_layers", int, f"{source}: lstm", default=1),
                cell_clip=_field(lstm, "cell_clip", float, f"{source}: lstm", default=0.0),
                proj_clip=_field(lstm, "proj_clip", float, f"{source}: lstm", default=0.0),
                use_skip_connections=_field(lstm, "use_skip_connections", bool, f"{source}: lstm"),
            ),
        )
        config.validate(source)
        return config

    def validate(self, source: str = "config") -> None:
        cnn, lstm = self.char_cnn, self.lstm
        positive = {
            "char_cnn.embedding.dim": cnn.embedding_dim,
            "lstm.dim": lstm.dim,
            "lstm.projection_dim": lstm.projection_dim,
            "lstm.n_layers": lstm.n_layers,
        }
        for name, value in positive.items():
            if value < 1:
                raise ConfigError(f"{source}: {name} is {value}; expected a positive integer")
        for name, clip in {"lstm.cell_clip": lstm.cell_clip, "lstm.proj_clip": lstm.proj_clip}.items():
            if not math.isfinite(clip):  # NaN < 0 is False: NaN would pass the sign check and poison every vector
                raise ConfigError(f"{source}: {name} is {clip}; expected a finite number (0 means no clipping)")
        if not cnn.filters:
            raise ConfigError(f"{source}: char_cnn.filters is empty; expected at least one [width, n_filters]")
        for width, n_filters in cnn.filters:
            if not 1 <= width <= cnn.max_characters_per_token or n_filters < 1:
                raise ConfigError(
                    f"{source}: char_cnn.filters has [{width}, {n_filters}]; expected 1 <= width <= "
                    f"max_characters_per_token ({cnn.max_characters_per_token}) and n_filters >= 1"
                )
        if cnn.activation not in ("relu", "tanh"):
            raise ConfigError(f"{source}: char_cnn.activation is {cnn.activation!r}; expected 'relu' or 'tanh'")
        if cnn.n_highway < 0:
            raise ConfigError(f"{source}: char_cnn.n_highway is {cnn.n_highway}; expected >= 0")
        if cnn.n_characters not in _ACCEPTED_N_CHARACTERS:
            raise ConfigError(
                f"{source}: char_cnn.n_characters is {cnn.n_characters}; expected {CHARACTER_IDS} or {N_CHARACTERS} "
                "(the byte-level scheme of bilm-tf)"
            )
        if cnn.max_characters_per_token < 3:
            raise ConfigError(f"{source}: char_cnn.max_characters_per_token must be >= 3")
        if lstm.projection_dim > lstm.dim:
            raise ConfigError(
                f"{source}: lstm.projection_dim ({lstm.projection_dim}) exceeds lstm.dim ({lstm.dim})"
            )
        if lstm.cell_clip < 0 or lstm.proj_clip < 0:
            raise ConfigError(f"{source}: lstm clips must be >= 0 (0 means no clipping)")
        self._check_sizes(source)

    def _check_sizes(self, source: str) -> None:
        cnn, lstm = self.char_cnn, self.lstm
        if len(cnn.filters) > MAX_SIZES["char_cnn.filters entries"]:
            raise ConfigError(f"{source}: char_cnn.filters has {len(cnn.filters)} entries; "
                              f"expected at most {MAX_SIZES['char_cnn.filters entries']}")
        if cnn.n_filters > MAX_SIZES["char_cnn.filters total"]:
            raise ConfigError(f"{source}: char_cnn.filters have {cnn.n_filters} filters in all; "
                              f"expected at most {MAX_SIZES['char_cnn.filters total']}")
        sizes = {
            "char_cnn.embedding.dim": cnn.embedding_dim,
            "char_cnn.n_highway": cnn.n_highway,
            "char_cnn.max_characters_per_token": cnn.max_characters_per_token,
            "lstm.dim": lstm.dim,
            "lstm.projection_dim": lstm.projection_dim,
            "lstm.n_layers": lstm.n_layers,
        }
        for name, value in sizes.items():
            if value > MAX_SIZES[name]:
                raise ConfigError(f"{source}: {name} is {value}; expected at most {MAX_SIZES[name]}")
        if self.n_parameters > MAX_PARAMETERS:
            raise ConfigError(
                f"{source}: these sizes make {self.n_parameters:,} parameters; expected at most {MAX_PARAMETERS:,}"
            )

    def to_options(self) -> dict[str, Any]:
        """bilm-tf's options. A clip of 0 (none) is written as null: bilm-tf clips whenever the key holds a number,
        so a written 0.0 would clamp every cell or output there to zero, and AllenNLP reads both keys without a
        default, so a model without them would not load there; both read null as no clip."""
        cnn, lstm = self.char_cnn, self.lstm
        return {
            "lstm": {
                "cell_clip": lstm.cell_clip or None,
                "proj_clip": lstm.proj_clip or None,
                "use_skip_connections": lstm.use_skip_connections,
                "n_layers": lstm.n_layers,
                "projection_dim": lstm.projection_dim,
                "dim": lstm.dim,
            },
            "char_cnn": {
                "embedding": {"dim": cnn.embedding_dim},
                "filters": [list(pair) for pair in cnn.filters],
                "n_highway": cnn.n_highway,
                "n_characters": cnn.n_characters,
                "max_characters_per_token": cnn.max_characters_per_token,
                "activation": cnn.activation,
            },
        }

    @classmethod
    def load(cls, path: str | Path) -> "BiLMConfig":
        path = Path(path)
        try:
            options = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such options file") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ConfigError(f"{path}: not valid JSON ({error})") from None
        if not isinstance(options, dict):
            raise ConfigError(f"{path}: expected a JSON object with 'char_cnn' and 'lstm'")
        return cls.from_options(options, source=str(path))

    @classmethod
    def preset(cls, name: str) -> "BiLMConfig":
        """A published ELMo size by name: small, medium, original (also the size of the 5.5B model)."""
        if name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; expected one of {sorted(PRESETS)}")
        return PRESETS[name]


def _published(n_highway: int, dim: int, projection_dim: int) -> BiLMConfig:
    return BiLMConfig(
        char_cnn=CharCNNConfig(
            embedding_dim=16, filters=_PUBLISHED_FILTERS, n_highway=n_highway, activation="relu"
        ),
        lstm=LSTMConfig(
            dim=dim,
            projection_dim=projection_dim,
            n_layers=2,
            cell_clip=3.0,
            proj_clip=3.0,
            use_skip_connections=True,
        ),
    )


PRESETS: dict[str, BiLMConfig] = {
    "small": _published(n_highway=1, dim=1024, projection_dim=128),  # elmo_2x1024_128_2048cnn_1xhighway
    "medium": _published(n_highway=1, dim=2048, projection_dim=256),  # elmo_2x2048_256_2048cnn_1xhighway
    "original": _published(n_highway=2, dim=4096, projection_dim=512),  # elmo_2x4096_512_2048cnn_2xhighway
}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _section(options: dict[str, Any], key: str, source: str) -> dict[str, Any]:
    value = options.get(key)
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: missing or malformed section {key!r}; expected a JSON object")
    return value


_CHAR_CNN_KEYS = frozenset({"embedding", "filters", "n_highway", "activation", "max_characters_per_token",
                            "n_characters"})
_EMBEDDING_KEYS = frozenset({"dim"})
_LSTM_KEYS = frozenset({"dim", "projection_dim", "n_layers", "cell_clip", "proj_clip", "use_skip_connections"})


def _refuse_unknown_keys(section: dict[str, Any], known: frozenset[str], source: str) -> None:
    unknown = sorted(set(section) - known)
    if unknown:
        raise ConfigError(f"{source}: unknown field {unknown[0]!r}; expected fields among {sorted(known)}")


_MISSING = object()


def _field(section: dict[str, Any], key: str, kind: type, source: str, default: Any = _MISSING) -> Any:
    """One typed field; ints are accepted where floats are expected (and given back as floats), never bools for
    numbers."""
    value = section.get(key, _MISSING)
    if value is _MISSING or (value is None and default is not _MISSING):
        if default is _MISSING:
            raise ConfigError(f"{source}: missing field {key!r}")
        return default
    if kind is int:
        ok = _is_int(value)
    elif kind is float:
        ok = _is_int(value) or isinstance(value, float)
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise ConfigError(f"{source}: field {key!r} is {value!r}; expected {kind.__name__}")
    if kind is float:
        try:
            return float(value)
        except OverflowError:  # JSON reads 1e400 as inf, which validate refuses, but 1 and 400 zeros as an int
            raise ConfigError(f"{source}: field {key!r} is an integer too large for a float (over 1.8e308); "
                              "expected a finite number") from None
    return value
