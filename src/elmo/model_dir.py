"""A model directory: ``options.json`` + ``weights.hdf5`` (the published layout), optionally
``tokenizer.json`` (``{"name": "english"}``: how raw text is split for this model), ``vocab.txt`` and a
model card ``README.md``. A name such as ``en`` finds a model shipped inside the package.
"""

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from elmo.bilm import BiLM
from elmo.tokenizers import TOKENIZERS
from elmo.weights import load_bilm

# bilm-tf's own dumps and AllenNLP's fixtures call the weights lm_weights.hdf5.
WEIGHT_FILE_NAMES = ("weights.hdf5", "lm_weights.hdf5")
DEFAULT_TOKENIZER = "whitespace"


def shipped_models_root() -> Path:
    return Path(str(resources.files("elmo") / "models"))


def shipped_models() -> list[str]:
    root = shipped_models_root()
    return sorted(p.name for p in root.iterdir() if (p / "options.json").is_file()) if root.is_dir() else []


@dataclass(frozen=True)
class ModelDir:
    path: Path
    options_file: Path
    weight_file: Path
    tokenizer: str

    @classmethod
    def find(cls, model: str | Path) -> "ModelDir":
        """``model`` is a directory, or the name of a shipped model."""
        path = Path(model)
        if not path.is_dir():
            shipped = shipped_models_root() / str(model)
            if isinstance(model, str) and "/" not in model and shipped.is_dir():
                path = shipped
            else:
                raise FileNotFoundError(
                    f"model {str(model)!r} is neither a directory nor a shipped model "
                    f"(shipped: {', '.join(shipped_models()) or 'none'})"
                )
        options_file = path / "options.json"
        if not options_file.is_file():
            raise FileNotFoundError(f"{path} holds no options.json; is it a model directory?")
        weight_file = next((path / name for name in WEIGHT_FILE_NAMES if (path / name).is_file()), None)
        if weight_file is None:
            raise FileNotFoundError(f"{path} holds no {' or '.join(WEIGHT_FILE_NAMES)}")
        return cls(path, options_file, weight_file, _read_tokenizer(path / "tokenizer.json"))

    def load_bilm(self) -> BiLM:
        return load_bilm(self.options_file, self.weight_file)


def _read_tokenizer(path: Path) -> str:
    if not path.is_file():
        return DEFAULT_TOKENIZER
    try:
        name = json.loads(path.read_text(encoding="utf-8"))["name"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise ValueError(f'{path}: expected {{"name": <tokenizer>}}') from None
    if name not in TOKENIZERS:
        raise ValueError(f"{path}: unknown tokenizer {name!r}; expected one of {sorted(TOKENIZERS)}")
    return name
