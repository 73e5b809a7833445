"""Sentences -> per-layer vectors: the everyday API.

``Embedder.embed`` takes raw strings (split by the model's tokenizer) or token lists and returns one
array per sentence, in input order. Inside, it

- runs the sentences of a window of batches (``bucket_batches``) one after another on ``batch_size``
  LSTM rows: when a sentence ends, its row takes the next one, from a zero state (continuous batching,
  ``elmo/lanes.py``). No padding is run, and the rows stay busy to the end;
- cuts a sentence longer than ``max_window_tokens`` into overlapping windows and stitches them: the
  sentence is split into consecutive cores of ``max_window_tokens - 2 * window_context`` tokens, each
  core is embedded inside a window that adds up to ``window_context`` tokens of the neighbouring text on
  either side, and each token keeps the vectors of the window in which it is in the core. So every
  token sees at least ``window_context`` tokens of real context on both sides (or the sentence edge),
  and the memory used is that of a batch of windows, whatever the sentence length;
- streams: ``iter_embed`` works through the input a window of batches at a time;
- keeps an LRU cache of context-free token vectors (``token_cache_size`` tokens, copies in one table of at most
  that many rows, so its memory is bounded in bytes; 0 turns it off), so the character CNN runs once per
  distinct token, not once per occurrence.

By default every sentence starts from a zero LSTM state, so its vectors do not depend on what else is
embedded. ``stateful=True`` instead carries each batch row's state into the next batch, as bilm-tf's
inference did (batches then run in input order, as padded batches, without windows).
"""

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from tqdm import tqdm

from elmo.bilm import BiLM, BiLMState
from elmo.characters import batch_to_char_ids
from elmo.memory import FreedMemoryTrimmer
from elmo.model_dir import ModelDir
from elmo.token_cache import TokenVectorCache
from elmo.tokenizers import get_tokenizer

Sentence = str | Sequence[str]
Layers = Literal["all", "top", "average"] | Sequence[float]

TFHUB_OUTPUTS = ("word_emb", "lstm_outputs1", "lstm_outputs2", "elmo", "default")


def layer_weights(layers: Layers, n_layers: int) -> np.ndarray | None:
    """``None`` for ``all``; otherwise float32 weights, one per layer. Raises ValueError naming the fault."""
    if isinstance(layers, str):
        if layers not in ("all", "top", "average"):
            raise ValueError(f"layers is {layers!r}; expected 'all', 'top', 'average' or mixing weights")
        if layers == "all":
            return None
        if layers == "top":
            return np.eye(n_layers, dtype=np.float32)[-1]
        return np.full(n_layers, 1.0 / n_layers, dtype=np.float32)
    try:
        values = np.asarray(layers, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"layers is {layers!r}; expected 'all', 'top', 'average' or mixing weights") from None
    if values.shape != (n_layers,):
        raise ValueError(f"got {values.size} mixing weights; the model has {n_layers} layers")
    # NaN or inf would make every vector NaN; beyond float32's range the cast below would give inf.
    if not (np.isfinite(values).all() and np.abs(values).max() <= np.finfo(np.float32).max):
        raise ValueError(f"mixing weights must be finite float32 numbers; got {values.tolist()}")
    return values.astype(np.float32)


def mix_layers(all_layers: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    """``(n_layers, T, D)`` as it is when ``weights`` is None, else ``sum_j w_j h_j``: ``(T, D)``."""
    if weights is None:
        return all_layers
    if np.count_nonzero(weights) == 1 and weights.max() == 1.0:  # one-hot: one layer as it is, no arithmetic
        return all_layers[int(weights.argmax())]
    return np.tensordot(weights, all_layers, axes=1)


@dataclass(frozen=True)
class _Piece:
    """A run of one sentence's tokens that is embedded as a unit; ``core`` is the part it supplies."""

    sentence: int
    tokens: Sequence[str]
    offset: int  # where tokens[0] stands in the sentence
    core_start: int  # sentence positions [core_start, core_end) come from this piece
    core_end: int


class Embedder:
    def __init__(
        self,
        bilm: BiLM,
        tokenizer: str = "whitespace",
        device: str | torch.device | None = None,
        max_window_tokens: int = 256,
        window_context: int = 64,
        bucket_batches: int = 16,
        stateful: bool = False,
        token_cache_size: int = 20_000,
    ) -> None:
        if max_window_tokens - 2 * window_context < 1:
            raise ValueError(
                f"max_window_tokens ({max_window_tokens}) must exceed 2 * window_context ({window_context})"
            )
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.bilm = bilm.to(self.device).eval()
        self.tokenizer_name = tokenizer
        self.tokenize_text = get_tokenizer(tokenizer)
        self.max_window_tokens = max_window_tokens
        self.window_context = window_context
        self.bucket_batches = bucket_batches
        self.stateful = stateful
        self._state: BiLMState | None = None
        self._memory = FreedMemoryTrimmer()
        self.token_cache = (
            TokenVectorCache(self.bilm.token_encoder, bilm.config.char_cnn.max_characters_per_token, token_cache_size)
            if token_cache_size > 0
            else None
        )

    @classmethod
    def load(cls, model: str = "en", tokenizer: str | None = None, **options) -> "Embedder":
        """From a model directory, or the name of a shipped model; the tokenizer defaults to the model's."""
        model_dir = ModelDir.find(model)
        return cls(model_dir.load_bilm(), tokenizer=tokenizer or model_dir.tokenizer, **options)

    @property
    def n_layers(self) -> int:
        return self.bilm.config.n_output_layers

    @property
    def dim(self) -> int:
        return self.bilm.config.output_dim

    def tokenize(self, sentence: Sentence) -> list[str]:
        if isinstance(sentence, str):
            return self.tokenize_text(sentence)
        if not all(isinstance(token, str) for token in sentence):
            raise TypeError(f"a tokenized sentence must hold strings; got {list(sentence)[:5]!r}")
        return list(sentence)

    def embed(
        self, sentences: Iterable[Sentence], layers: Layers = "all", batch_size: int = 32, progress: bool = False
    ) -> list[np.ndarray]:
        """One float32 array per sentence: ``(n_layers, T, 2P)`` for ``all``, else ``(T, 2P)``.

        ``top`` is the last layer, ``average`` the mean of all layers, and a sequence of ``n_layers``
        numbers weights the layers as given (``sum_j w_j h_j``; normalize them yourself if you want).
        """
        return list(self.iter_embed(sentences, layers, batch_size, progress))

    def iter_embed(
        self, sentences: Iterable[Sentence], layers: Layers = "all", batch_size: int = 32, progress: bool = False
    ) -> Iterator[np.ndarray]:
        """``embed`` as a stream: holds only a window of ``batch_size * bucket_batches`` sentences."""
        weights = layer_weights(layers, self.n_layers)
        if batch_size < 1:
            raise ValueError(f"batch_size is {batch_size}; expected at least 1")
        chunk_size = batch_size if self.stateful else batch_size * self.bucket_batches
        bar = tqdm(disable=not progress, unit=" sentences", desc="embedding")
        chunk: list[list[str]] = []
        for sentence in sentences:
            chunk.append(self.tokenize(sentence))
            if len(chunk) == chunk_size:
                yield from self._finish(self._embed_chunk(chunk, batch_size), weights, bar)
                chunk = []
        if chunk:
            yield from self._finish(self._embed_chunk(chunk, batch_size), weights, bar)
        bar.close()

    def embed_tfhub(self, sentences: Iterable[Sentence], batch_size: int = 32) -> list[dict[str, np.ndarray]]:
        """The outputs TF Hub's ELMo module names: ``word_emb`` (T, P), ``lstm_outputs1``, ``lstm_outputs2``
        (T, 2P), ``elmo`` (T, 2P; the even mix of all layers, which is the module's untrained mix) and
        ``default`` (2P,: ``elmo`` averaged over the sentence's tokens; zeros for an empty sentence)."""
        results = []
        for all_layers in self.iter_embed(sentences, "all", batch_size):
            projection_dim = self.dim // 2
            mixed = all_layers.mean(axis=0)
            outputs = {"word_emb": all_layers[0, :, :projection_dim]}
            for k in range(1, self.n_layers):
                outputs[f"lstm_outputs{k}"] = all_layers[k]
            outputs["elmo"] = mixed
            outputs["default"] = mixed.mean(axis=0) if len(mixed) else np.zeros(self.dim, np.float32)
            results.append(outputs)
        return results

    def reset_state(self) -> None:
        """Forget the state carried between batches (stateful mode only)."""
        self._state = None

    def warm_up(self, sentences: Iterable[Sentence], batch_size: int = 32) -> None:
        """Run sentences through a stateful embedder only to prime its carried state."""
        if not self.stateful:
            raise ValueError("warm_up only makes sense with stateful=True")
        for _ in self.iter_embed(sentences, "top", batch_size):
            pass

    def _finish(self, arrays: list[np.ndarray], weights: np.ndarray | None, bar: tqdm) -> Iterator[np.ndarray]:
        for array in arrays:
            bar.update(1)
            yield mix_layers(array, weights)

    def _embed_chunk(self, sentences: list[list[str]], batch_size: int) -> list[np.ndarray]:
        """Every layer of each sentence, ``(n_layers, T, 2P)`` float32, in the order given."""
        results = [np.zeros((self.n_layers, len(tokens), self.dim), np.float32) for tokens in sentences]
        if self.stateful:
            pieces = [_Piece(i, tokens, 0, 0, len(tokens)) for i, tokens in enumerate(sentences)]
            groups = [pieces[start : start + batch_size] for start in range(0, len(pieces), batch_size)]
        else:
            pieces = [piece for i, tokens in enumerate(sentences) for piece in self._cut(i, tokens)]
            pieces.sort(key=lambda piece: len(piece.tokens), reverse=True)
            groups = self._lane_groups(pieces, batch_size)
        for group in groups:
            self._store(group, self._layers_of([piece.tokens for piece in group], batch_size), results)
            self._memory.after_batch()  # the group's tensors are all freed by now
        return results

    @staticmethod
    def _store(group: list[_Piece], layers: list[np.ndarray], results: list[np.ndarray]) -> None:
        """Copy each piece's core from its layers into its sentence's result."""
        for piece, piece_layers in zip(group, layers, strict=True):
            core = slice(piece.core_start - piece.offset, piece.core_end - piece.offset)
            results[piece.sentence][:, piece.core_start : piece.core_end] = piece_layers[:, core]

    def _cut(self, sentence: int, tokens: list[str]) -> list[_Piece]:
        if len(tokens) <= self.max_window_tokens:
            return [_Piece(sentence, tokens, 0, 0, len(tokens))]
        core = self.max_window_tokens - 2 * self.window_context
        pieces = []
        for core_start in range(0, len(tokens), core):
            core_end = min(core_start + core, len(tokens))
            start = max(0, core_start - self.window_context)
            end = min(len(tokens), core_end + self.window_context)
            pieces.append(_Piece(sentence, tokens[start:end], start, core_start, core_end))
        return pieces

    def _lane_groups(self, pieces: list[_Piece], batch_size: int) -> list[list[_Piece]]:
        """Runs of pieces that each hold at most ``batch_size`` full windows' worth of steps, so one run on the
        lanes needs no more memory than a batch of full windows."""
        budget = batch_size * (self.max_window_tokens + 2)
        groups: list[list[_Piece]] = []
        steps = budget
        for piece in pieces:
            if steps + len(piece.tokens) + 2 > budget:
                groups.append([])
                steps = 0
            groups[-1].append(piece)
            steps += len(piece.tokens) + 2
        return groups

    @torch.inference_mode()
    def _layers_of(self, token_lists: list[Sequence[str]], batch_size: int) -> list[np.ndarray]:
        """Each token list's layers ``(n_layers, T, 2P)``. Stateless, the lists run one after another on
        ``batch_size`` LSTM rows (``elmo/lanes.py``); stateful, they are one batch, row r continuing row r."""
        lengths = [len(tokens) for tokens in token_lists]
        token_vectors = self._token_vectors(token_lists)
        if not self.stateful:
            layers = self.bilm.contextualize_lanes(token_vectors, lengths, batch_size).float().cpu().numpy()
            return np.split(layers, np.cumsum(lengths)[:-1], axis=1)
        lengths_tensor = torch.tensor(lengths, device=self.device)
        mask = torch.arange(max(lengths), device=self.device)[None, :] < lengths_tensor[:, None]
        padded = token_vectors.new_zeros((*mask.shape, token_vectors.shape[1]))
        padded[mask] = token_vectors
        output, new_state = self.bilm.contextualize(padded, mask, self._carried_state(len(token_lists)))
        self._carry(new_state)
        layers = output.layers.float().cpu().numpy()
        return [layers[:, row, :length] for row, length in enumerate(lengths)]

    def _token_vectors(self, token_lists: list[Sequence[str]]) -> torch.Tensor:
        """``(n_tokens, P)``: the lists' context-free token vectors end to end, from the cache if there is one."""
        if self.token_cache is not None:
            return self.token_cache.token_vectors(token_lists, self.device)
        tokens = [token for token_list in token_lists for token in token_list]
        if not tokens:
            return torch.zeros((0, self.dim // 2), device=self.device)
        char_ids = batch_to_char_ids([tokens], self.bilm.config.char_cnn.max_characters_per_token).to(self.device)
        return self.bilm.encode_tokens(char_ids, torch.ones(char_ids.shape[:2], dtype=torch.bool,
                                                            device=self.device))[0]

    def _carried_state(self, batch_size: int) -> BiLMState:
        """Row r continues row r of the previous batch; rows it did not have start from zeros."""
        state = self.bilm.zero_state(batch_size)
        if self._state is not None:
            rows = min(batch_size, self._state.h.shape[2])
            state.h[:, :, :rows] = self._state.h[:, :, :rows]
            state.c[:, :, :rows] = self._state.c[:, :, :rows]
        return state

    def _carry(self, new_state: BiLMState) -> None:
        if self._state is None or self._state.h.shape[2] <= new_state.h.shape[2]:
            self._state = new_state
            return
        # A smaller batch updates its rows and leaves the others' state as it was (as bilm-tf does).
        rows = new_state.h.shape[2]
        self._state.h[:, :, :rows] = new_state.h
        self._state.c[:, :, :rows] = new_state.c
