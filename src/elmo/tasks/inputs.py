"""What a task model reads for each token, and batches of it.

A token's input is the concatenation of (any of) the ELMo representation (the learned scalar mix of all
biLM layers, or the top layer alone), a static word vector, and a one-hot of its position in its word
(Chinese characters read by the word-level biLM). The static baselines and ELMo therefore differ only in
these features: the encoder, the output layer and the training are the same code.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar, cast

import numpy as np
import torch
from torch import nn

from elmo.bilm import BiLM
from elmo.characters import batch_to_char_ids
from elmo.modules.scalar_mix import ScalarMix
from elmo.task_module import Elmo
from elmo.tasks.data import WORD_POSITIONS, Example
from elmo.tasks.options import DROPOUT, MIX_L2

ElmoMode = Literal["mix", "top"]


@dataclass(frozen=True)
class Item:
    """One example's token-level inputs: ``layers`` float16 ``(n_layers, T, D)``, ``static`` float32
    ``(T, S)``, ``positions`` int ``(T,)``; ``target`` is the tag ids ``(T,)`` or the label id. When the
    biLM is fine-tuned, it runs in the model: ``words`` and each token's ``word_index`` ``(T,)`` replace
    ``layers``."""

    layers: torch.Tensor | None
    static: torch.Tensor | None
    positions: torch.Tensor | None
    target: torch.Tensor | int
    words: tuple[str, ...] | None = None
    word_index: torch.Tensor | None = None


@dataclass
class Batch:
    """``layers`` ``(n_layers, B, T, D)``, ``static`` ``(B, T, S)``, ``positions`` ``(B, T)``, ``mask``
    ``(B, T)`` bool, ``lengths`` ``(B,)``; ``targets`` ``(B, T)`` (tags, 0 at padding) or ``(B,)``; for a
    fine-tuned biLM the sentences' ``words`` (the biLM makes their character ids at its own width) and
    ``word_index`` ``(B, T)``."""

    layers: torch.Tensor | None
    static: torch.Tensor | None
    positions: torch.Tensor | None
    mask: torch.Tensor
    lengths: torch.Tensor
    targets: torch.Tensor
    words: list[list[str]] | None = None
    word_index: torch.Tensor | None = None


def make_items(examples: Sequence[Example], layers: Sequence[np.ndarray] | None, static,
               positions: bool, targets: Sequence[torch.Tensor | int], fine_tune: bool = False) -> list[Item]:
    """Token-level items: each token takes its word's biLM layers and static vector (``static`` is a
    ``StaticVectors`` or None); with ``fine_tune`` the items carry the words for the model's own biLM."""
    if layers is not None and len(layers) != len(examples):
        raise ValueError(f"{len(layers)} cached feature arrays for {len(examples)} examples")
    items = []
    for i, example in enumerate(examples):
        index = torch.tensor(example.word_index)
        example_layers = None
        if layers is not None:
            if layers[i].shape[1] != len(example.words):
                raise ValueError(f"example {i} ({example.key[:40]!r}) has {len(example.words)} words but its cached "
                                 f"features have {layers[i].shape[1]}: is the cache from other data?")
            example_layers = torch.from_numpy(layers[i])[:, index]
        example_static = None if static is None else torch.from_numpy(static.lookup(example.words))[index]
        example_positions = torch.tensor(example.word_positions()) if positions else None
        words = example.words if fine_tune else None
        items.append(Item(example_layers, example_static, example_positions, targets[i], words,
                          index if fine_tune else None))
    return items


_Field = TypeVar("_Field")


def _all_present(values: Sequence[_Field | None], field: str) -> list[_Field]:
    """``values``, none of them None: a batch's items all have ``field`` when its first one does."""
    present = [value for value in values if value is not None]
    if len(present) != len(values):
        raise ValueError(f"a batch mixes items with and without {field}")
    return present


def collate(items: Sequence[Item]) -> Batch:
    lengths = torch.tensor([_length(item) for item in items])
    batch_size, time = len(items), int(lengths.max())
    mask = torch.arange(time)[None, :] < lengths[:, None]

    def pad(tensors: list[torch.Tensor], time_dim: int) -> torch.Tensor:
        shape = list(tensors[0].shape)
        shape[time_dim] = time
        out = torch.zeros([batch_size, *shape], dtype=tensors[0].dtype)
        for row, tensor in enumerate(tensors):
            out[row].narrow(time_dim, 0, tensor.shape[time_dim]).copy_(tensor)
        return out

    first = items[0]
    layers: torch.Tensor | None = None
    static: torch.Tensor | None = None
    positions: torch.Tensor | None = None
    if first.layers is not None:
        layers = pad(_all_present([item.layers for item in items], "layers"), 1).transpose(0, 1).float()
    if first.static is not None:
        static = pad(_all_present([item.static for item in items], "static"), 0)
    if first.positions is not None:
        positions = pad(_all_present([item.positions for item in items], "positions"), 0)
    if isinstance(first.target, torch.Tensor):
        tag_ids = [item.target if isinstance(item.target, torch.Tensor) else None for item in items]
        targets = pad(_all_present(tag_ids, "tag ids"), 0)
    else:
        targets = torch.tensor([item.target for item in items])
    words = word_index = None
    if first.words is not None:
        words = [list(item_words) for item_words in _all_present([item.words for item in items], "words")]
        word_index = pad(_all_present([item.word_index for item in items], "word_index"), 0)
    return Batch(layers, static, positions, mask, lengths, targets, words, word_index)


def _length(item: Item) -> int:
    for part in (item.layers, item.static, item.positions, item.word_index):
        if part is not None:
            return part.shape[-2] if part.dim() >= 2 else part.shape[0]
    raise ValueError("an item needs ELMo layers, static vectors or word positions")


class TokenFeatures(nn.Module):
    """``forward(batch) -> (B, T, dim)``: the token inputs, concatenated, with dropout.

    - ``elmo``: ``"mix"`` (the task-learned scalar mix, ``gamma * sum_j softmax(s)_j h_j``), ``"top"`` (the
      last layer), or None; ``n_layers``/``elmo_dim`` describe the cached layers.
    - ``static_dim``: width of the static vectors (0: none); ``positions``: add the word-position one-hot.
    - ``mix_l2``: weight of ``||softmax(s) - 1/n_layers||^2`` in the loss (0.001 in the paper): the paper's
      ``lambda * ||w||^2`` read on the softmax weights, not bilm-tf's ``l2_coef * sum(s^2)`` on the raw scalars,
      whose pull stays strong where this one vanishes, once one layer dominates (``ScalarMix``).
    - ``bilm``: a biLM to fine-tune with the task: the public ``Elmo`` layer (``fine_tune=True``) runs it on
      the batch's ``char_ids`` and mixes its layers, the top layer being a fixed mix; otherwise the cached,
      frozen layers are mixed here by the same ``ScalarMix``.
    """

    def __init__(self, elmo: ElmoMode | None, n_layers: int, elmo_dim: int, static_dim: int = 0,
                 positions: bool = False, dropout: float = DROPOUT, mix_l2: float = MIX_L2,
                 bilm: BiLM | None = None) -> None:
        super().__init__()
        if bilm is not None and elmo is None:
            raise ValueError("a biLM to fine-tune needs an ELMo input ('mix' or 'top')")
        if elmo not in (None, "mix", "top"):
            raise ValueError(f"elmo is {elmo!r}; expected 'mix', 'top' or None")
        if elmo is None and not static_dim and not positions:
            raise ValueError("a task model needs some input: ELMo layers, static vectors or word positions")
        self.elmo = elmo
        self.elmo_layer: Elmo | None = None
        self.mix: ScalarMix | None = None
        if bilm is not None:
            top_only = [0.0] * (n_layers - 1) + [1.0] if elmo == "top" else None
            self.elmo_layer = Elmo(bilm, dropout=0.0, fine_tune=True, fixed_weights=top_only, mix_l2=mix_l2)
        elif elmo == "mix":
            self.mix = ScalarMix(n_layers, l2=mix_l2)
        self.static_dim = static_dim
        self.positions = positions
        self.dim = (elmo_dim if elmo else 0) + static_dim + (len(WORD_POSITIONS) if positions else 0)
        self.dropout = nn.Dropout(dropout)

    def forward(self, batch: Batch) -> torch.Tensor:
        parts = []
        if self.elmo is not None:
            parts.append(self.elmo_vectors(batch))
        if self.static_dim:
            if batch.static is None:
                raise ValueError("this model reads static vectors, but the batch has none")
            parts.append(batch.static)
        if self.positions:
            if batch.positions is None:
                raise ValueError("this model reads word positions, but the batch has none")
            parts.append(nn.functional.one_hot(batch.positions, len(WORD_POSITIONS)).float())
        return self.dropout(torch.cat(parts, dim=-1))

    def elmo_vectors(self, batch: Batch) -> torch.Tensor:
        """``(B, T, D)``: each token's ELMo vector, from the biLM being fine-tuned (run on the words, then
        each token takes its word's vector) or from the batch's cached layers."""
        if self.elmo_layer is not None:
            if batch.words is None or batch.word_index is None:
                raise ValueError("this model fine-tunes its biLM, but the batch has no words")
            width = self.elmo_layer.bilm.config.char_cnn.max_characters_per_token  # as the frozen features use
            word_vectors = self.elmo_layer(batch_to_char_ids(batch.words, width)).mixes[0]
            return word_vectors.gather(1, batch.word_index[:, :, None].expand(-1, -1, word_vectors.shape[-1]))
        if batch.layers is None:
            raise ValueError("this model reads ELMo layers, but the batch has none")
        return self.mix(batch.layers, batch.mask) if self.mix is not None else batch.layers[-1]

    def learned_mix(self) -> ScalarMix | None:
        """The scalar mix the task learns (None for the top layer alone or no ELMo)."""
        if self.elmo != "mix":
            return None
        return cast(ScalarMix, self.elmo_layer.mixes[0]) if self.elmo_layer is not None else self.mix

    def mix_weights(self) -> list[float] | None:
        """softmax(s), the learned share of each layer (None without a learned mix)."""
        mix = self.learned_mix()
        return None if mix is None else torch.softmax(mix.scalars.detach(), 0).tolist()

    def regularization(self) -> torch.Tensor:
        mix = self.learned_mix()
        return torch.zeros(()) if mix is None else mix.regularization()
