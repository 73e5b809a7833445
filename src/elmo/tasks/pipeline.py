"""From files (or examples) to a trained, tested task model: the steps the ``elmo task`` commands and the
experiment script share, so that every method of a comparison runs through the same code."""

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from elmo.files import sha256_of
from elmo.static_vectors import StaticVectors
from elmo.tasks.data import (
    SEGMENTERS,
    Example,
    classification_examples,
    read_labelled,
    read_tagged,
    tagging_examples,
)
from elmo.tasks.features import cache_layers, load_layers
from elmo.tasks.options import TrainOptions
from elmo.tasks.spec import TaskSpec
from elmo.tasks.train import Labeller, fit, items_for, predict, scorer, seed_everything

if TYPE_CHECKING:
    from elmo.embedder import Embedder

log = logging.getLogger(__name__)

LOW_STATIC_COVERAGE = 0.5  # under this share of train's words with a vector, static features are mostly zeros


def segmenter(name: str | None):
    """None, or a function from a string of characters to words."""
    if name is None:
        return None
    if name not in SEGMENTERS:
        raise ValueError(f"segment is {name!r}; expected one of {', '.join(SEGMENTERS)}")
    from elmo.tokenizers import get_tokenizer

    return get_tokenizer(name)


def text_tokenizer_of(model: str) -> Callable[[str], list[str]]:
    """A function that splits text as ``model``'s embedder does: cleaned as every reader cleans it
    (``clean_text``), then the model's tokenizer. (``training.export.model_tokenizer`` is the tokenizer's name.)"""
    from elmo.model_dir import ModelDir
    from elmo.tokenizers import clean_text, get_tokenizer

    tokenize = get_tokenizer(ModelDir.find(model).tokenizer)
    return lambda text: tokenize(clean_text(text))


def read_examples(kind: str, path: str | Path, model: str, segment: str | None = None,
                  max_words: int | None = None) -> list[Example]:
    """A tagging file (CoNLL BIO) or a classification file (label TAB text) as examples for ``model``."""
    if kind == "tagger":
        return tagging_examples(read_tagged(path), segmenter(segment))
    return classification_examples(read_labelled(path), text_tokenizer_of(model), max_words)


def static_source(name: str) -> tuple[str | None, str | None]:
    """What a task spec records of ``--static NAME``: None for ``none``; ``glove`` as it is; a vectors file by
    its absolute path and its sha256, so that the model reads the same vectors from any directory and
    ``load_static`` refuses another file put at that path."""
    if name == "none":
        return None, None
    if name == "glove":
        return name, None
    path = Path(name)
    if not path.is_file():
        raise FileNotFoundError(f"--static {name}: no such file; expected none, glove or an .npz written by "
                                "StaticVectors.save")
    return str(path.resolve()), sha256_of(path)


def load_static(name: str | None, sha256: str | None = None) -> StaticVectors | None:
    """``glove`` (GloVe 6B 50d), an ``.npz`` written by StaticVectors.save, or None. With ``sha256`` (what the
    task spec recorded), a file whose bytes differ is refused: a model fed other vectors predicts nonsense
    without an error."""
    if name is None:
        return None
    if name == "glove":
        return StaticVectors.glove()
    path = Path(name)
    if sha256 is not None:
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file; this task model was trained on the static vectors "
                                    "its task.json names there")
        if (found := sha256_of(path)) != sha256:
            raise ValueError(f"{path}: these are not the static vectors this task model was trained on (sha256 "
                             f"{sha256[:12]}..., found {found[:12]}...): put back the file it was trained on, or "
                             "train the task model again on these vectors")
    return StaticVectors.load(path)


def warn_of_low_static_coverage(static: StaticVectors | None, name: str | None, train_words: Iterable[str]) -> float:
    """The share of the train split's words (``train_words``, as the model reads them) that ``static`` has a
    vector for, logged as a warning when under ``LOW_STATIC_COVERAGE``: the others read as zero vectors, so
    GloVe (English) under a Chinese model trains on almost nothing, without an error."""
    if static is None:
        return 1.0
    words = list(train_words)
    share = static.coverage(words)
    if share < LOW_STATIC_COVERAGE:
        log.warning("--static %s has a vector for %.0f %% of the %d words of the train split (the rest read as "
                    "zeros): are these vectors for the model's language and tokenizer?", name, 100 * share, len(words))
    return share


def features_embedder(model: str) -> "Embedder":
    """The embedder whose layers are a task's frozen features: ``model`` (a directory or a shipped name) reading
    words as given (examples hold words already). Its ``fingerprint`` is what a task spec records of the biLM."""
    from elmo.embedder import Embedder
    from elmo.model_dir import ModelDir

    return Embedder(ModelDir.find(model).load_bilm(), tokenizer="whitespace")


def embed_examples(embedder: "Embedder", splits: Mapping[str, Sequence[Example]], cache_dir: str | Path,
                   batch_size: int = 64, progress: bool = False) -> dict[str, list[np.ndarray]]:
    """Every biLM layer of each split's words, cached in ``cache_dir/{split}.h5`` (reused when it holds the
    same model, by its fingerprint, and the same words)."""
    layers = {}
    for name, examples in splits.items():
        words = [list(example.words) for example in examples]
        path = cache_layers(embedder, words, Path(cache_dir) / f"{name}.h5", batch_size, progress)
        layers[name] = load_layers(path, len(examples))
    return layers


def require_examples(splits: Mapping[str, Sequence], files: Mapping[str, str | Path] | None = None) -> None:
    """ValueError naming each of ``train``, ``dev`` and ``test`` that holds no examples (and its file, from
    ``files``): checked before any embedding or training, as an empty test split is otherwise found only
    when it is scored, after the whole run, and the model is never saved. A dev or test file that is an
    earlier split's file is warned of, once, for the first such split: scored on train, it measures data the
    model was trained on; test scored on dev is the data early stopping chose the epoch on, so it is optimistic."""
    files = files or {}
    empty = [f"{files[name]}: the {name} split holds no examples" if name in files
             else f"the {name} split holds no examples" for name in ("train", "dev", "test") if not splits.get(name)]
    if empty:
        raise ValueError("; ".join(empty) + " (a task model trains on train, stops on dev and is scored on test)")
    resolved = {name: Path(path).resolve() for name, path in files.items()}
    for name, earlier in (("dev", ("train",)), ("test", ("train", "dev"))):
        same = next((other for other in earlier if other in resolved and resolved.get(name) == resolved[other]), None)
        if same is None:
            continue
        why = ("its score then measures the data the model was trained on, not new data" if same == "train" else
               "early stopping picks the epoch that scores best on it, so the test score is optimistic, not a "
               "measure on new data")
        log.warning("the %s split is the %s file (%s, given as --%s and --%s): %s", name, same, files[name], same,
                    name, why)


def train_and_test(spec: TaskSpec, splits: Mapping[str, Sequence[Example]], layers: dict[str, list[np.ndarray]] | None,
                   static: StaticVectors | None, options: TrainOptions) -> tuple[Labeller, dict]:
    """Fits on ``train`` with early stopping on ``dev``, scores ``test`` once; returns the model and a
    summary (metric, dev and test scores, epochs, seconds, the learned mixing weights)."""
    require_examples(splits)
    seed_everything(options.seed)
    model = spec.build_labeller()
    items = {name: items_for(spec, examples, None if layers is None else layers[name], static)
             for name, examples in splits.items()}
    metric, score = scorer(spec)
    result = fit(model, items["train"], items["dev"], score, options)
    summary = {"metric": metric, "dev": result.best_dev, "test": score(model, items["test"]),
               "best_epoch": result.best_epoch, "epochs_run": result.epochs_run, "seconds": result.seconds,
               "mix_weights": model.features.mix_weights(), "seed": options.seed,
               "sizes": {name: len(examples) for name, examples in splits.items()}, "options": asdict(options)}
    return model, summary


def predict_examples(spec: TaskSpec, model: Labeller, examples: Sequence[Example],
                     static: StaticVectors | None, batch_size: int = 64) -> list:
    """Tag names per token (tagger) or a label name per example (classifier), embedding on the fly."""
    layers = None
    if spec.elmo is not None and not spec.fine_tune:
        embedder = spec.load_embedder()
        layers = [array.astype(np.float16) for array in
                  embedder.iter_embed([list(example.words) for example in examples], "all", batch_size)]
    items = items_for(spec, examples, layers, static, with_targets=False)
    guesses = predict(model, items, batch_size)
    if spec.kind == "tagger":
        return [[spec.labels[i] for i in ids] for ids in guesses]
    return [spec.labels[i] for i in guesses]
