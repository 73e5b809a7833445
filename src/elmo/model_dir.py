"""A model directory: ``options.json`` + ``weights.hdf5`` (the published layout), optionally
``tokenizer.json`` (``{"name": "english"}``: how raw text is split for this model), ``vocab.txt`` and a
model card ``README.md``. A name such as ``en`` finds a model shipped inside the package.

A directory of files as AllenNLP publishes them (``<name>_options.json`` + ``<name>_weights.hdf5``) loads too,
so the downloads work as they are.
"""

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from elmo.bilm import BiLM
from elmo.tokenizers import TOKENIZERS
from elmo.weights import load_bilm

# A model directory's files (``elmo.training.export`` writes them); bilm-tf's own dumps and AllenNLP's fixtures
# call the weights lm_weights.hdf5.
OPTIONS_FILE = "options.json"
WEIGHTS_FILE = "weights.hdf5"
VOCAB_FILE = "vocab.txt"
TOKENIZER_FILE = "tokenizer.json"  # {"name": <tokenizer>}: how the training text was split
WEIGHT_FILE_NAMES = (WEIGHTS_FILE, "lm_weights.hdf5")
# AllenNLP names a model's files <name>_options.json and <name>_weights.hdf5; a variant of the weights may add to
# the name after "_weights" (<name>_weights*.hdf5).
ALLENNLP_OPTIONS_SUFFIX = "_options.json"
ALLENNLP_WEIGHTS_INFIX = "_weights"
ALLENNLP_EXAMPLE = "elmo_2x4096_512_2048cnn_2xhighway"
DEFAULT_TOKENIZER = "whitespace"
SOFTMAX_FILE = "softmax.safetensors"  # a trained model's softmax (elmo.training.export writes it)
# What a model directory holds: these, and a shipped model's card.
MODEL_FILES = frozenset({OPTIONS_FILE, WEIGHTS_FILE, VOCAB_FILE, SOFTMAX_FILE, TOKENIZER_FILE, "README.md"})


def shipped_models_root() -> Path:
    return Path(str(resources.files("elmo") / "models"))


def shipped_models() -> list[str]:
    root = shipped_models_root()
    return sorted(p.name for p in root.iterdir() if is_model_directory(p)) if root.is_dir() else []


def locate_model(model: str | Path, holds: Callable[[Path], bool] | None = None) -> Path:
    """Where ``model`` is: the path itself where it exists and holds what is wanted (``holds``, by default a model
    directory; training also takes a run), else the shipped model of that bare name (``en``), else the path as
    given, for the reader to name what it lacks. So a folder of the working directory named ``en`` that holds no
    model (an index built with ``--out en``, a corpus) does not hide the shipped ``en``; but a path written as one
    (``./en``, ``en/``) or a folder holding a weight file (an export cut short before its ``options.json``) is never
    swapped for the shipped model, which would load other weights without a word."""
    path = Path(model)
    if path.exists() and (holds or is_model_directory)(path):
        return path
    shipped = shipped_models_root() / path.name
    if _is_bare_name(model) and not _holds_weight_file(path) and is_model_directory(shipped):
        return shipped
    return path


def _is_bare_name(model: str | Path) -> bool:
    """Whether ``model`` is a name such as ``en`` rather than a path: one part, and as a string no separator and no
    leading dot (``Path`` drops both from ``./en`` and ``en/``, so the string is read where there is one)."""
    text = str(model)
    separators = {"/", os.sep} | ({os.altsep} if os.altsep else set())
    return (len(Path(model).parts) == 1 and not text.startswith(".")
            and not any(separator in text for separator in separators))


def _holds_weight_file(path: Path) -> bool:
    """Whether the directory ``path`` holds a file named as a model's weights (``_model_files`` reads)."""
    return path.is_dir() and any(
        child.is_file() and (child.name in WEIGHT_FILE_NAMES
                             or (ALLENNLP_WEIGHTS_INFIX in child.name and child.name.endswith(".hdf5")))
        for child in path.iterdir()
    )


def is_model_directory(path: Path) -> bool:
    """Whether ``path`` holds a model's options under a name ``ModelDir.find`` reads (``options.json`` or
    AllenNLP's ``<name>_options.json``): the one test of "a model, not a training run", so that every reader
    sends such a directory to ``ModelDir.find``, which names whatever else it lacks."""
    return path.is_dir() and ((path / OPTIONS_FILE).is_file() or bool(_allennlp_options_names(path)))


def _allennlp_options_names(path: Path) -> list[str]:
    return sorted(child.name for child in path.iterdir() if child.name.endswith(ALLENNLP_OPTIONS_SUFFIX)
                  and child.is_file())


@dataclass(frozen=True)
class ModelDir:
    path: Path
    options_file: Path
    weight_file: Path
    tokenizer: str

    @classmethod
    def find(cls, model: str | Path) -> "ModelDir":
        """``model`` is a directory, or the name of a shipped model (``locate_model``)."""
        path = locate_model(model)
        if not path.is_dir():
            raise FileNotFoundError(f"model {str(model)!r} is neither a directory nor a shipped model "
                                    f"(shipped: {', '.join(shipped_models()) or 'none'})")
        options_file, weight_file = _model_files(path)
        return cls(path, options_file, weight_file, _read_tokenizer(path / TOKENIZER_FILE))

    def load_bilm(self) -> BiLM:
        return load_bilm(self.options_file, self.weight_file)


def _model_files(path: Path) -> tuple[Path, Path]:
    """The options and weight files of the model in ``path``: this project's names, else AllenNLP's."""
    options_file = path / OPTIONS_FILE
    if options_file.is_file():
        weight_file = next((path / name for name in WEIGHT_FILE_NAMES if (path / name).is_file()), None)
        if weight_file is None:
            raise FileNotFoundError(f"{path} holds no {' or '.join(WEIGHT_FILE_NAMES)}")
        return options_file, weight_file
    names = sorted(child.name for child in path.iterdir() if child.is_file())
    options_names = _allennlp_options_names(path)
    pairs = [
        (options_name, weight_name)
        for options_name in options_names
        for weight_name in names
        if weight_name.startswith(options_name.removesuffix(ALLENNLP_OPTIONS_SUFFIX) + ALLENNLP_WEIGHTS_INFIX)
        and weight_name.endswith(".hdf5")
    ]
    if len(pairs) == 1:
        return path / pairs[0][0], path / pairs[0][1]
    if pairs:
        listed = "; ".join(f"{options_name} + {weight_name}" for options_name, weight_name in pairs)
        raise ValueError(f"{path} holds {len(pairs)} models ({listed}); give each its own directory")
    if options_names:
        prefix = options_names[0].removesuffix(ALLENNLP_OPTIONS_SUFFIX)
        raise FileNotFoundError(f"{path} holds {options_names[0]} but no {prefix}{ALLENNLP_WEIGHTS_INFIX}.hdf5 "
                                "beside it; download the weights that go with it into the same directory")
    raise FileNotFoundError(
        f"{path} holds no options.json; expected options.json + {' or '.join(WEIGHT_FILE_NAMES)}, or AllenNLP's "
        f"<name>{ALLENNLP_OPTIONS_SUFFIX} + <name>{ALLENNLP_WEIGHTS_INFIX}.hdf5 (e.g. "
        f"{ALLENNLP_EXAMPLE}{ALLENNLP_OPTIONS_SUFFIX} + {ALLENNLP_EXAMPLE}{ALLENNLP_WEIGHTS_INFIX}.hdf5)"
    )


def tokenizer_file_text(name: str) -> str:
    """``tokenizer.json``'s text for the tokenizer ``name`` (``_read_tokenizer`` reads it back)."""
    return json.dumps({"name": name}) + "\n"


def _read_tokenizer(path: Path) -> str:
    if not path.is_file():
        return DEFAULT_TOKENIZER
    try:
        name = json.loads(path.read_text(encoding="utf-8"))["name"]
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
        raise ValueError(f'{path}: expected UTF-8 JSON {{"name": <tokenizer>}}') from None
    if not isinstance(name, str):
        raise ValueError(f'{path}: "name" is {name!r}; expected a tokenizer name, one of {sorted(TOKENIZERS)}')
    if name not in TOKENIZERS:
        raise ValueError(f"{path}: unknown tokenizer {name!r}; expected one of {sorted(TOKENIZERS)}")
    return name
