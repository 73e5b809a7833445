"""The bidirectional language model: token encoder, then a forward and a backward LSTM stack.

``BiLM.forward`` takes character ids without sentence boundaries, adds ``<S>``/``</S>`` itself, runs
both directions (the backward one over each sentence reversed from its own last token) and returns
the L+1 ELMo layers, by default with the boundaries removed: layer 0 is the token vector twice, layer k is
``[forward_k, backward_k]``. With ``keep_boundaries=True`` the boundaries' layers come back too, in
AllenNLP's layout (``<S>`` at position 0, a row's n tokens at 1..n, ``</S>`` at n + 1).

State is explicit. With ``state=None`` every sentence starts from zeros, so its vectors do not depend
on the rest of the batch or on earlier calls. Passing back the returned state continues each row
where it stopped, as bilm-tf's stateful inference does (the forward state after ``</S>``, the
backward state after ``<S>``).

``BiLM.contextualize_lanes`` runs many sentences, each from zeros, a few at a time on a fixed number of
LSTM rows (``elmo/lanes.py``): what the ``Embedder`` uses, as it keeps every row busy.

``BiLM.reference_kernels = True`` runs autograd through each direction's step loop whatever the batch: the
kernel that a gradient over rows of one length would get gives first-order gradients only (docs/model.md).
"""

from collections.abc import Sequence
from typing import NamedTuple, overload

import torch
from torch import nn

from elmo.characters import bos_char_ids, eos_char_ids
from elmo.config import CHARACTER_IDS, BiLMConfig
from elmo.lanes import pack_lanes
from elmo.modules.bidirectional import run_directions
from elmo.modules.char_cnn import TokenEncoder
from elmo.modules.lstm import LstmStack


class BiLMState(NamedTuple):
    """Both directions' LSTM states, rows in batch order.

    ``h``: ``(2, n_layers, batch, projection_dim)``, ``c``: ``(2, n_layers, batch, dim)``; index 0 of the
    first axis is the forward direction, 1 the backward.
    """

    h: torch.Tensor
    c: torch.Tensor

    def detach(self) -> "BiLMState":
        return BiLMState(self.h.detach(), self.c.detach())


class BiLMOutput(NamedTuple):
    """``layers``: ``(n_layers + 1, batch, max_tokens, 2 * projection_dim)``, zeros at padding;
    ``mask``: ``(batch, max_tokens)`` bool, True at real tokens. With the boundaries kept, ``max_tokens + 2``
    positions a row, the mask True at ``<S>`` and ``</S>`` too."""

    layers: torch.Tensor
    mask: torch.Tensor


class BiLM(nn.Module):
    bos_char_ids: torch.Tensor  # buffers, (max_characters,): what the token encoder reads for <S> and </S>
    eos_char_ids: torch.Tensor

    def __init__(self, config: BiLMConfig) -> None:
        super().__init__()
        self.config = config
        projection_dim = config.lstm.projection_dim
        max_characters = config.char_cnn.max_characters_per_token
        self.token_encoder = TokenEncoder(config.char_cnn, projection_dim)
        self.forward_lstm = LstmStack(config.lstm, projection_dim)
        self.backward_lstm = LstmStack(config.lstm, projection_dim)
        self.register_buffer("bos_char_ids", torch.tensor(bos_char_ids(max_characters)), persistent=False)
        self.register_buffer("eos_char_ids", torch.tensor(eos_char_ids(max_characters)), persistent=False)
        self.reference_kernels = False  # True: the step loop always, for gradients of gradients (module docstring)

    def zero_state(self, batch_size: int, like: torch.Tensor | None = None) -> BiLMState:
        lstm = self.config.lstm
        reference = like if like is not None else self.token_encoder.char_embeddings
        shape = (2, lstm.n_layers, batch_size)
        return BiLMState(
            reference.new_zeros((*shape, lstm.projection_dim)), reference.new_zeros((*shape, lstm.dim))
        )

    def forward(
        self, char_ids: torch.Tensor, state: BiLMState | None = None, keep_boundaries: bool = False
    ) -> tuple[BiLMOutput, BiLMState]:
        """``char_ids``: ``(batch, max_tokens, max_characters)``, each row's tokens first, then all-zero
        padding tokens. Returns the layers and mask, and the state to pass to a following call.

        ``keep_boundaries``: return ``max_tokens + 2`` positions a row, ``<S>`` and ``</S>`` included (module
        docstring), with a mask that is True at them too."""
        mask = self._check_char_ids(char_ids)
        return self.contextualize(self.encode_tokens(char_ids, mask), mask, state, keep_boundaries)

    def encode_tokens(self, char_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Context-free token vectors ``(batch, max_tokens, projection_dim)``, zeros at padding.

        The encoder sees each token on its own, so each distinct token of the batch is encoded once.
        """
        unique_ids, inverse = torch.unique(char_ids[mask], dim=0, return_inverse=True)
        unique_vectors = self.token_encoder(unique_ids)
        token_vectors = unique_vectors.new_zeros((*mask.shape, unique_vectors.shape[1]))
        token_vectors[mask] = unique_vectors[inverse]
        return token_vectors

    def contextualize(
        self, token_vectors: torch.Tensor, mask: torch.Tensor, state: BiLMState | None = None,
        keep_boundaries: bool = False,
    ) -> tuple[BiLMOutput, BiLMState]:
        """The LSTM stacks over token vectors ``(batch, max_tokens, projection_dim)``; ``<S>``/``</S>`` are
        added here (and returned with ``keep_boundaries``, as ``forward`` says). Lets a caller supply token vectors
        it already has (a cache) instead of character ids.

        Each row runs on its own LSTM row, from ``state`` (zeros when None): the lanes of ``elmo/lanes.py`` with one
        sentence a lane."""
        lengths = _check_mask(mask)
        batch_size, max_tokens, width = token_vectors.shape
        if state is None:
            state = self.zero_state(batch_size, like=token_vectors)
        else:
            self._check_state(state, batch_size)
        output_mask = mask
        if keep_boundaries:
            output_mask = torch.arange(max_tokens + 2, device=mask.device)[None, :] < (lengths + 2)[:, None]
        layers = token_vectors.new_zeros((self.config.n_output_layers, *output_mask.shape, 2 * width))
        if batch_size == 0:
            return BiLMOutput(layers, output_mask), state
        layers[:, output_mask], new_state = self._run_sentences(
            token_vectors[mask], lengths.tolist(), batch_size, state, keep_boundaries
        )
        return BiLMOutput(layers, output_mask), new_state

    def contextualize_lanes(self, token_vectors: torch.Tensor, lengths: Sequence[int], n_lanes: int) -> torch.Tensor:
        """The layers of many sentences, run a few at a time on ``n_lanes`` LSTM rows (``elmo/lanes.py``).

        ``token_vectors``: ``(n_tokens, projection_dim)``, the sentences' token vectors end to end; ``lengths``:
        each sentence's number of tokens. Returns ``(n_layers + 1, n_tokens, 2 * projection_dim)`` in the same
        order: what ``contextualize`` gives each sentence alone, from a zero state. A model without clipping
        runs as PyTorch's fused LSTM (cuDNN on a GPU), which takes no restarts: there each sentence has its own row.
        """
        if sum(lengths) != token_vectors.shape[0]:
            raise ValueError(f"lengths add up to {sum(lengths)} tokens but {token_vectors.shape[0]} vectors came")
        if len(lengths) == 0:  # a list, or an array, whose truth is ambiguous
            return token_vectors.new_zeros((self.config.n_output_layers, 0, 2 * token_vectors.shape[1]))
        fused = all(layer.fuses for layer in self.forward_lstm.layers)
        return self._run_sentences(token_vectors, list(lengths), len(lengths) if fused else n_lanes)[0]

    @overload
    def _run_sentences(self, token_vectors: torch.Tensor, lengths: list[int], n_lanes: int,
                       state: BiLMState, keep_boundaries: bool = False) -> tuple[torch.Tensor, BiLMState]: ...
    @overload
    def _run_sentences(self, token_vectors: torch.Tensor, lengths: list[int], n_lanes: int,
                       state: None = None, keep_boundaries: bool = False) -> tuple[torch.Tensor, None]: ...
    def _run_sentences(self, token_vectors: torch.Tensor, lengths: list[int], n_lanes: int,
                       state: BiLMState | None = None,
                       keep_boundaries: bool = False) -> tuple[torch.Tensor, BiLMState | None]:
        """Sentences laid end to end (``token_vectors (n_tokens, width)``, at least one sentence) -> their layers
        ``(n_layers + 1, n_tokens, 2 * width)``: ``<S>``/``</S>`` added around each, both directions run on
        ``n_lanes`` rows; with ``keep_boundaries`` each sentence's ``<S>`` and ``</S>`` positions stay in, around
        its tokens (``n_tokens + 2 * n_sentences`` positions). With ``state`` (one row per sentence, ``n_lanes`` =
        the number of sentences) each sentence starts from its row and the state where each stopped comes back;
        otherwise lanes start at zero."""
        device, width = token_vectors.device, token_vectors.shape[1]
        bounded_lengths = [length + 2 for length in lengths]  # <S>, the tokens, </S>
        ends = torch.tensor(bounded_lengths, device=device).cumsum(0)
        starts = ends - torch.tensor(bounded_lengths, device=device)
        is_token = torch.ones(sum(bounded_lengths), dtype=torch.bool, device=device)
        is_token[starts] = False
        is_token[ends - 1] = False
        bos_vector, eos_vector = self.token_encoder(torch.stack([self.bos_char_ids, self.eos_char_ids]))
        bounded = token_vectors.new_empty((len(is_token), width))
        bounded[starts] = bos_vector
        bounded[ends - 1] = eos_vector
        bounded[is_token] = token_vectors

        packing = pack_lanes(bounded_lengths, n_lanes)
        restarts = {step: rows.to(device) for step, rows in packing.restarts.items()}
        indices = torch.stack([packing.forward_index, packing.backward_index]).to(device)
        if state is None:
            initial = self.zero_state(packing.batch_sizes[0], like=bounded)
        else:  # lane k runs sentence order[k]
            order = torch.tensor(packing.first_sequences, device=device)
            initial = BiLMState(state.h[:, :, order], state.c[:, :, order])
        run = run_directions(self.forward_lstm, self.backward_lstm, bounded[indices], packing.batch_sizes,
                             initial.h, initial.c, restarts, reference=self.reference_kernels)
        layers = _unpack_layers(bounded, indices, run.layers)
        if not keep_boundaries:
            layers = layers[:, is_token]
        if state is None:
            return layers, None
        restore = torch.empty_like(order)
        restore[order] = torch.arange(len(order), device=device)
        return layers, BiLMState(run.h[:, :, restore], run.c[:, :, restore])

    def _check_state(self, state: BiLMState, batch_size: int) -> None:
        """Refuse a state of another shape than this model's for ``batch_size`` rows: indexing would otherwise drop
        a layer or pick rows from it without a word."""
        lstm = self.config.lstm
        expected_h = (2, lstm.n_layers, batch_size, lstm.projection_dim)
        expected_c = (2, lstm.n_layers, batch_size, lstm.dim)
        if tuple(state.h.shape) != expected_h or tuple(state.c.shape) != expected_c:
            raise ValueError(
                f"state has h {tuple(state.h.shape)} and c {tuple(state.c.shape)}; expected h {expected_h} and "
                f"c {expected_c} (2 directions, n_layers, batch, projection_dim / dim)"
            )

    def _check_char_ids(self, char_ids: torch.Tensor) -> torch.Tensor:
        max_characters = self.config.char_cnn.max_characters_per_token
        if char_ids.dim() != 3 or char_ids.shape[2] != max_characters:
            raise ValueError(
                f"char_ids has shape {tuple(char_ids.shape)}; expected (batch, tokens, {max_characters})"
            )
        if char_ids.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"char_ids has dtype {char_ids.dtype}; expected torch.int64 or torch.int32")
        if char_ids.numel() and (char_ids.min() < 0 or char_ids.max() > CHARACTER_IDS):
            raise ValueError(f"char_ids holds ids outside 0..{CHARACTER_IDS}; were they made by elmo.characters?")
        return (char_ids > 0).any(dim=-1)


def _unpack_layers(token_vectors: torch.Tensor, indices: torch.Tensor, lstm_layers: list[torch.Tensor]) -> torch.Tensor:
    """``(n_layers + 1, positions, 2 * width)``: layer 0 the ``token_vectors (positions, width)`` twice, layer k the
    k-th LSTM layer's packed outputs ``(2, packed, width)`` put back where ``indices (2, packed)`` read them from,
    forward half first. Positions no stream read stay zero."""
    n_positions, width = token_vectors.shape
    layers = token_vectors.new_zeros((len(lstm_layers) + 1, n_positions, 2 * width))
    layers[0] = torch.cat([token_vectors, token_vectors], dim=1)
    for k, outputs in enumerate(lstm_layers, start=1):
        for half in (0, 1):
            layers[k, indices[half], half * width : (half + 1) * width] = outputs[half]
    return layers


def _check_mask(mask: torch.Tensor) -> torch.Tensor:
    """Each row's lengths; its real tokens must come first, then padding. A mask of another dtype is refused: a
    0/1 integer mask indexes positions rather than selecting them, which failed with an unrelated error."""
    if mask.dtype != torch.bool:
        raise TypeError(f"mask has dtype {mask.dtype}; expected torch.bool (mask.bool() of a 0/1 mask)")
    lengths = mask.sum(dim=1)
    positions = torch.arange(mask.shape[1], device=mask.device)
    if not torch.equal(mask, positions[None, :] < lengths[:, None]):
        raise ValueError("a padding token comes before a real token in some row")
    return lengths
