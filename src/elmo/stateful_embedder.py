"""bilm-tf's inference: each batch row's LSTM state carried into the next batch.

A sentence's vectors then depend on what was embedded before it in its row (AllenNLP's fixture was made this
way; ``tests/test_stateful_embedder.py`` reproduces it). Batches run in input order, as padded batches, without
windows, so that row r of one batch continues row r of the last. ``Embedder``, where every sentence starts
from a zero state, is what to use otherwise.
"""

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Self, TypeVar, cast

import numpy as np
import torch

from elmo.bilm import BiLM, BiLMState
from elmo.embedder import Embedder, Piece, Sentence, Tokens

_Call = TypeVar("_Call", bound=Callable[..., Any])


def _state_kept_on_failure(call: _Call) -> _Call:
    """``call`` (a method of ``StatefulEmbedder``), putting the carried state back as it was if it raises."""

    @functools.wraps(call)
    def kept(self: "StatefulEmbedder", *args: Any, **kwargs: Any) -> Any:
        state_before = self._state  # never changed in place (``_carry``), so the reference keeps it
        try:
            return call(self, *args, **kwargs)
        except BaseException:
            self._state = state_before
            raise

    return cast(_Call, kept)


class StatefulEmbedder(Embedder):
    """An ``Embedder`` whose batches continue the LSTM state of the batch before, row by row.

    A call that returns everything at once (``encode``, ``embed``, ``embed_tfhub``, ``warm_up``) and fails part
    way (a bad sentence in a later batch, an interrupt) leaves the carried state as it was before the call: it
    returned no vectors, so a retry with fixed input gives what a clean run gives. ``iter_embed`` carries the
    state on a batch at a time as it embeds them, failure or not: its caller has had those batches' vectors.
    """

    carries_state = True

    def __init__(self, bilm: BiLM, tokenizer: str = "whitespace", device: str | torch.device | None = None,
                 token_cache_size: int = 20_000) -> None:
        self._state: BiLMState | None = None  # set first: the base class may call ``to``, which moves it
        super().__init__(bilm, tokenizer, device, token_cache_size=token_cache_size)

    def to(self, device: str | torch.device) -> Self:
        super().to(device)
        if self._state is not None:
            self._state = BiLMState(*(tensor.to(self.device) for tensor in self._state))
        return self

    @property
    def reading(self) -> dict[str, str | int]:
        """Its class only: it cuts no sentence into windows, so the base class's window settings do not apply."""
        return {"embedder": type(self).__name__}

    def reset_state(self) -> None:
        """Forget the state carried between batches."""
        self._state = None

    encode = _state_kept_on_failure(Embedder.encode)
    embed = _state_kept_on_failure(Embedder.embed)
    embed_tfhub = _state_kept_on_failure(Embedder.embed_tfhub)

    @_state_kept_on_failure
    def warm_up(self, sentences: Iterable[Sentence], batch_size: int = 32) -> None:
        """Run sentences through only to prime the carried state."""
        for _ in self.iter_embed(sentences, "top", batch_size):
            pass

    def _chunk_size(self, batch_size: int) -> int:
        return batch_size  # one batch at a time, in input order

    def _groups(self, sentences: list[Tokens], batch_size: int) -> list[list[Piece]]:
        pieces = [Piece(i, tokens, 0, 0, len(tokens)) for i, tokens in enumerate(sentences)]
        return [pieces[start : start + batch_size] for start in range(0, len(pieces), batch_size)]

    @torch.inference_mode()
    def _layers_of(self, token_lists: list[Sequence[str]], batch_size: int) -> list[np.ndarray]:
        """The token lists as one padded batch, row r continuing row r of the last batch."""
        lengths = [len(tokens) for tokens in token_lists]
        token_vectors = self._token_vectors(token_lists)
        lengths_tensor = torch.tensor(lengths, device=self.device)
        mask = torch.arange(max(lengths), device=self.device)[None, :] < lengths_tensor[:, None]
        padded = token_vectors.new_zeros((*mask.shape, token_vectors.shape[1]))
        padded[mask] = token_vectors
        output, new_state = self.bilm.contextualize(padded, mask, self._carried_state(len(token_lists)))
        layers = output.layers.float().cpu().numpy()
        self._carry(new_state)  # last: a batch that failed on the way to its vectors has not moved the state
        return [layers[:, row, :length] for row, length in enumerate(lengths)]

    def _carried_state(self, batch_size: int) -> BiLMState:
        """Row r continues row r of the previous batch; rows it did not have start from zeros."""
        state = self.bilm.zero_state(batch_size)
        if self._state is not None:
            rows = min(batch_size, self._state.h.shape[2])
            state.h[:, :, :rows] = self._state.h[:, :, :rows]
            state.c[:, :, :rows] = self._state.c[:, :, :rows]
        return state

    def _carry(self, new_state: BiLMState) -> None:
        """Take ``new_state`` as the carried state, into new tensors: a saved reference to the old state (see
        ``_state_kept_on_failure``) stays as it was."""
        if self._state is None or self._state.h.shape[2] <= new_state.h.shape[2]:
            self._state = new_state
            return
        # A smaller batch updates its rows and leaves the others' state as it was (as bilm-tf does).
        rows = new_state.h.shape[2]
        self._state = BiLMState(
            *(torch.cat([new, old[:, :, rows:]], dim=2) for new, old in zip(new_state, self._state, strict=True))
        )
