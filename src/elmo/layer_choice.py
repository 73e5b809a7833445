"""Which biLM layers a caller wants: the one vocabulary of ``Embedder``, ``elmo embed``, search and the service.

A ``LayerChoice`` is

- ``"all"``: every layer, ``(L+1, T, D)`` per sentence;
- ``"top"``: the last layer; ``"average"``: the even mix of all layers (TF Hub's ``elmo`` output);
- an int: the layer of that index, ``0`` (the context-free token layer) to ``L``, or counted from the top,
  ``-1`` to ``-(L+1)``;
- ``L+1`` numbers (a sequence or a NumPy array): mixing weights, ``sum_j w_j h_j``, taken as given (not normalized).

``parse_layers`` reads one from a Python value or from text (a command line, a JSON string): the names, an
integer (``2``, ``-1``, or ``layer2``, as an index names its stored layers) or comma-separated weights
(``0,0.5,0.5``). Its refusal is one message, ``layers is ...; expected ...``, wherever the choice came from.
What a choice needs of the model (an index in range, one weight per layer) is checked where the model is
known: ``layer_weights`` for mixing, ``stored_layer`` for search, which keeps one vector per token.

A task model's learned scalar mix (``elmo task train --elmo mix``) is trained with the task, not chosen here;
it lives with the task models (``elmo.tasks.inputs``).
"""

import argparse
import re
from collections.abc import Sequence
from numbers import Real
from typing import Literal, TypeAlias, get_args

import numpy as np

LayerName: TypeAlias = Literal["all", "top", "average"]
LayerChoice: TypeAlias = LayerName | int | np.integer | Sequence[float] | np.ndarray  # what parse_layers takes
StoredLayer: TypeAlias = int | Literal["average"]  # what search keeps one vector per token of

NAMES: tuple[LayerName, ...] = get_args(LayerName)
_INDEX = re.compile(r"-?[0-9]+|layer([0-9]+)")  # [0-9], not \d: full-width digits are not an index
_FLOAT32_MAX = float(np.finfo(np.float32).max)


class LayerChoiceError(ValueError):
    """A layer choice refused: not one of the forms, or not one this model (or this use) can take."""


def _expected(value: object) -> str:
    return (f"layers is {value!r}; expected 'all', 'top', 'average', a layer index or mixing weights "
            "(one per layer; as text, comma-separated: 0,0.5,0.5)")


def parse_layers(value: object) -> LayerName | int | list[float]:
    """``value`` as a ``LayerChoice``: a name, an int or a list of float weights. Text is read as described in
    the module docstring. LayerChoiceError if it is none of these, or if a weight is not a finite float32
    number (it would make every vector NaN or infinite) or is nonzero but rounds to 0 in float32 (it would be
    dropped from the mix without a word). Whether it fits a model is not checked here."""
    if isinstance(value, str):
        return _parse_text(value)
    if isinstance(value, bool | np.bool_):  # an int to Python, but never meant as a layer index
        raise LayerChoiceError(_expected(value))
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, bytes | bytearray | memoryview):  # a Sequence of ints: b"top" would be 3 weights
        raise LayerChoiceError(_expected(value))
    if isinstance(value, np.ndarray) and value.ndim == 0:  # a 0-d array: an index or nothing, as its item is
        return parse_layers(value.item())
    if isinstance(value, Sequence | np.ndarray) and len(value) > 0:
        if not all(isinstance(weight, Real) and not isinstance(weight, bool | np.bool_) for weight in value):
            raise LayerChoiceError(_expected(value))
        return _finite([float(weight) for weight in value], value)
    raise LayerChoiceError(_expected(value))


def _parse_text(text: str) -> LayerName | int | list[float]:
    stripped = text.strip()
    for name in NAMES:
        if stripped == name:
            return name
    index = _INDEX.fullmatch(stripped)
    if index is not None:
        return int(index.group(1) or stripped)
    if "," in stripped and stripped.isascii():  # float() would read full-width digits too
        try:
            weights = [float(part) for part in stripped.split(",")]
        except ValueError:
            raise LayerChoiceError(_expected(text)) from None
        return _finite(weights, text)
    raise LayerChoiceError(_expected(text))


def _finite(weights: list[float], given: object) -> list[float]:
    # NaN or inf would make every vector NaN; beyond float32's range the vectors' cast would give inf; a nonzero
    # weight below float32's smallest would become 0, and weights all 0 mix every vector to zeros.
    if not all(np.isfinite(weight) and abs(weight) <= _FLOAT32_MAX for weight in weights):
        raise LayerChoiceError(f"layers is {given!r}; mixing weights must be finite float32 numbers")
    for weight in weights:
        if weight != 0 and np.float32(weight) == 0:
            raise LayerChoiceError(f"layers is {given!r}; mixing weight {weight!r} rounds to 0 in float32 (the "
                                   f"smallest nonzero float32 is {float(np.finfo(np.float32).smallest_subnormal):.1e})")
    return weights


def layer_weights(layers: object, n_layers: int) -> np.ndarray | None:
    """``None`` for ``"all"``; otherwise float32 weights ``(n_layers,)`` (a single layer is one-hot).
    LayerChoiceError naming the fault: the form, an index out of range, a weight count other than ``n_layers``."""
    choice = parse_layers(layers)
    if choice == "all":
        return None
    if choice == "average":
        return np.full(n_layers, 1.0 / n_layers, dtype=np.float32)
    if isinstance(choice, str | int):
        return np.eye(n_layers, dtype=np.float32)[_index(choice, n_layers)]
    if len(choice) != n_layers:
        raise LayerChoiceError(f"layers is {list(choice)!r}: {len(choice)} mixing weights; the model has {n_layers} "
                               "layers, one weight each")
    return np.asarray(choice, dtype=np.float32)


def stored_layer(layers: object, n_layers: int) -> StoredLayer:
    """The choice as search stores it, one vector per token: a layer index in ``0..n_layers - 1`` (``"top"``
    and negative indexes resolved) or ``"average"``. LayerChoiceError for ``"all"`` and mixing weights."""
    choice = _one_vector(layers)
    return "average" if choice == "average" else _index(choice, n_layers)


def _one_vector(layers: object) -> Literal["top", "average"] | int:
    """``layers`` parsed, when it is a choice of one vector per token; the refusal names only those choices (what
    search takes), also for text that is no choice at all."""
    try:
        choice: LayerName | int | list[float] | None = parse_layers(layers)
    except LayerChoiceError:  # no choice at all
        choice = None
    if isinstance(choice, int) or choice == "top" or choice == "average":
        return choice
    raise LayerChoiceError(f"layers is {layers if choice is None else choice!r}; an index keeps one vector per token: "
                           "expected a layer index, 'top' or 'average'")


def _index(choice: Literal["top"] | int, n_layers: int) -> int:
    if choice == "top":
        return n_layers - 1
    if not -n_layers <= choice < n_layers:
        raise LayerChoiceError(f"layers is {choice}; a layer index must be in {-n_layers}..{n_layers - 1} "
                               f"(the model has {n_layers} layers)")
    return choice % n_layers


def mix_layers(all_layers: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    """``(n_layers, T, D)`` as it is when ``weights`` is None, else ``sum_j w_j h_j``: ``(T, D)``."""
    if weights is None:
        return all_layers
    if np.count_nonzero(weights) == 1 and weights.max() == 1.0:  # one-hot: one layer as it is, no arithmetic
        # a copy: a view would keep every layer of the sentence alive for as long as the caller keeps this one
        return all_layers[int(weights.argmax())].copy()
    return np.tensordot(weights, all_layers, axes=1)


def layers_argument(text: str) -> LayerChoice:
    """An argparse type for ``--layers``: the choice, checked as the command line is read."""
    try:
        return parse_layers(text)
    except LayerChoiceError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def stored_layer_argument(text: str) -> LayerChoice:
    """An argparse type for search's ``--layer``: a choice of one vector per token (an index, ``top`` or
    ``average``); whether the model has that layer is checked once it is loaded."""
    try:
        return _one_vector(text)
    except LayerChoiceError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
